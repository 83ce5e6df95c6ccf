// Package names holds the naming conventions every tabby component must agree on: host veth
// names (the CNI plugin creates them, felix finds them), the object names of IPAM resources, the
// IPAM handles of the nodes' tunnel addresses, the MAC of a node's VXLAN devices, and the file
// by which tabby-node says it runs without BGP.
package names

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// HostVethPrefix starts every host-side workload interface, as in Calico, so operators' existing
// rules and habits (`ip link show | grep cali`) keep working.
const HostVethPrefix = "cali"

// HostVethName is "cali" + the first 11 hex digits of sha1("<namespace>.<pod>"): 15 characters,
// the kernel's limit. Without a pod identity (a runtime that passes no K8S_POD_* args) the
// container ID stands in, so the name is still stable across ADD, CHECK and DEL.
func HostVethName(namespace, pod, containerID string) string {
	key := namespace + "." + pod
	if namespace == "" || pod == "" {
		key = containerID
	}
	sum := sha1.Sum([]byte(key))
	return HostVethPrefix + hex.EncodeToString(sum[:])[:11]
}

// IsHostVeth tells whether an interface name is a tabby workload interface.
func IsHostVeth(name string) bool { return strings.HasPrefix(name, HostVethPrefix) }

// BlockName is the IPAMBlock object name for a block: 10.244.1.64/26 → 10-244-1-64-26,
// fd00:10:244::40/122 → fd00-10-244--40-122 (as Calico). Names of the two families never meet:
// an IPv4 name has five fields and no "--", an IPv6 one has nine fields or a "--".
func BlockName(block netip.Prefix) string {
	name := strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(block.String())
	if strings.HasPrefix(name, "-") {
		// A block of ::/N's first addresses: an object name must start with an alphanumeric.
		name = "0" + name
	}
	return name
}

// AffinityName is the BlockAffinity object name for a node's claim on a block.
func AffinityName(node string, block netip.Prefix) string {
	return node + "-" + BlockName(block)
}

// HandleName is a DNS-subdomain-safe object name for an IPAM handle ID. Handle IDs are
// <network>.<containerID>; network names may carry characters object names may not, so anything
// outside [a-z0-9.-] becomes '-' and a short hash of the original keeps distinct IDs distinct.
func HandleName(handleID string) string {
	var b strings.Builder
	safe := true
	for _, r := range strings.ToLower(handleID) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
			safe = false
		}
	}
	name := strings.Trim(b.String(), ".-")
	if safe && name == handleID && len(name) <= 253 {
		return name
	}
	sum := sha1.Sum([]byte(handleID))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	if len(name) > 253-len(suffix) {
		name = name[:253-len(suffix)]
	}
	return strings.Trim(name, ".-") + suffix
}

// BGPOffFile, in tabby-node's run directory beside its BGP status socket, says that the node
// runs without BGP (tabby-node --bgp=none): `tabbyctl node status` tells that from an agent that
// is not running.
const BGPOffFile = "bgp-off"

// TunnelHandle is the IPAM handle of a node's tunl0 address.
func TunnelHandle(node string) string { return "ipip-tunnel-addr-" + node }

// VXLANTunnelHandle is the IPAM handle of the address of a node's VXLAN device of family fam,
// its VTEP: vxlan-tunnel-addr-<node> (vxlan.tabby) and vxlan-v6-tunnel-addr-<node>
// (vxlan-v6.tabby), Calico's names for the same addresses.
func VXLANTunnelHandle(node string, fam ipfamily.Family) string {
	if fam == ipfamily.IPv6 {
		return "vxlan-v6-tunnel-addr-" + node
	}
	return "vxlan-tunnel-addr-" + node
}

// VXLANMAC is the MAC address of node's VXLAN device of family fam: locally administered,
// unicast, and a function of the name and family alone. Every other node's neighbour and FDB
// entries for the VTEP name this MAC, so it must not change while the node is the same node: a
// re-created Node object (a rejoin, which keeps its IPAM and so its VTEP address) and a
// restarted agent find the same MAC without keeping it anywhere, and the peers' entries stay
// right. A random MAC kept only in the Node's annotation would change with the object, and
// traffic to the node would go to the old MAC until every peer had reprogrammed.
func VXLANMAC(node string, fam ipfamily.Family) [6]byte {
	sum := sha256.Sum256([]byte("tabby-vxlan/" + fam.String() + "/" + node))
	var mac [6]byte
	copy(mac[:], sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02 // unicast, locally administered
	return mac
}
