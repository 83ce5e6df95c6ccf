package policy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Set kinds, the letter after "tabby-" in a set name.
const (
	setKindPods      = 'p' // hash:ip: the pods one peer selects
	setKindCIDR      = 'c' // hash:net: one ipBlock, its excepts as nomatch entries
	setKindNamedPort = 'n' // hash:ip,port: every pod's (address, protocol:port) for one port name
	setKindNodes     = 'h' // hash:ip: the addresses of the nodes an admin policy's nodes peer selects
)

// hashLen base32 characters (100 bits) keep "tabby-p4-" + hash at 29 characters, within
// ipset's 31.
const hashLen = 20

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// SetName is the ipset for selection id of a kind in family fam: "tabby-<kind><4|6>-<hash>".
// ipset names are global across families, hence the family in the name; the hash of the
// selection (not of a policy) makes identical selections of different policies one set and
// keeps a name stable across restarts and upgrades.
func setName(kind byte, fam ipfamily.Family, id string) string {
	sum := sha256.Sum256([]byte(id))
	return fmt.Sprintf("%s%c%d-%s", NamePrefix, kind, uint8(fam), lowerBase32.EncodeToString(sum[:])[:hashLen])
}

// podSet is the hash:ip set of the pods s selects, in this family.
func (r *renderer) podSet(s *podSelection) string {
	name := s.setName.Get(r.fam)
	if _, ok := r.out.IPSets[name]; ok {
		return name
	}
	var members []string
	for _, pod := range r.c.pods {
		if r.c.selectsPod(s, pod) {
			members = appendAddrMembers(members, r.c.addrs(pod), r.fam)
		}
	}
	r.addSet(name, "hash:ip", members)
	return name
}

// blockSet is the hash:net set of b, or false when b is of the other family or matches no
// address at all.
func (r *renderer) blockSet(b *ipBlock) (string, bool) {
	if !b.renders(r.fam) {
		return "", false
	}
	r.addSet(b.setName, "hash:net", slices.Clone(b.members))
	return b.setName, true
}

// renders tells whether b has a set in family fam: it is of that family and matches some
// address.
func (b *ipBlock) renders(fam ipfamily.Family) bool {
	return len(b.members) > 0 && ipfamily.OfPrefix(b.cidr) == fam
}

// blockMembers renders b for hash:net, where the most specific entry containing an address
// decides and a nomatch entry says "not in the set". hash:net cannot hold a /0, so a /0 is
// its two halves; a half (or the cidr) that an except covers whole is left out, and an except
// is kept only strictly inside a kept entry, so no entry is ever both a match and a nomatch.
func blockMembers(b ipBlock) []string {
	pieces := []netip.Prefix{b.cidr}
	if b.cidr.Bits() == 0 {
		upper := b.cidr.Addr().AsSlice()
		upper[0] |= 0x80
		hi, _ := netip.AddrFromSlice(upper)
		pieces = []netip.Prefix{netip.PrefixFrom(b.cidr.Addr(), 1), netip.PrefixFrom(hi, 1)}
	}
	var members []string
	for _, piece := range pieces {
		covered := slices.ContainsFunc(b.except, func(e netip.Prefix) bool {
			return e.Bits() <= piece.Bits() && e.Contains(piece.Addr())
		})
		if covered {
			continue
		}
		members = append(members, netMember(piece))
		for _, e := range b.except {
			if e.Bits() > piece.Bits() && piece.Contains(e.Addr()) {
				members = append(members, netMember(e)+" nomatch")
			}
		}
	}
	return members
}

// netMember is p as ipset prints a hash:net entry: a host prefix as a bare address.
func netMember(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

// namedPortSet is the hash:ip,port set of every pod-network pod's address with its port
// named as ps names it. It is shared by every egress rule using that name; the rule
// intersects it with its peers' sets.
func (r *renderer) namedPortSet(ps *portSpec) string {
	set := ps.setName.Get(r.fam)
	if _, ok := r.out.IPSets[set]; ok {
		return set
	}
	var members []string
	for _, pod := range r.c.pods {
		members = appendNamedPortMembers(members, pod, r.c.addrs(pod), ps.name, ps.proto, r.fam)
	}
	r.addSet(set, "hash:ip,port", members)
	return set
}

// nodeSet is the hash:ip set of the addresses of the nodes n selects, in this family.
func (r *renderer) nodeSet(n *nodeSelection) string {
	name := n.setName.Get(r.fam)
	if _, ok := r.out.IPSets[name]; !ok {
		r.addSet(name, "hash:ip", nodeMembers(r.c.nodes, n.sel, r.fam))
	}
	return name
}

func namedPortSetName(name string, proto Protocol, fam ipfamily.Family) string {
	return setName(setKindNamedPort, fam, strconv.Quote(name)+"/"+string(proto))
}

// appendAddrMembers appends a pod's addresses of family fam as hash:ip members. A pod's members
// are a function of its addresses alone, so the incremental calculation can take away exactly
// what it once added.
func appendAddrMembers(members []string, addrs []netip.Addr, fam ipfamily.Family) []string {
	for _, ip := range addrs {
		if ip = ip.Unmap(); ip.IsValid() && ipfamily.OfAddr(ip) == fam {
			members = append(members, ip.String())
		}
	}
	return members
}

// appendNamedPortMembers appends a pod's (address, protocol:port) members for its ports named
// name for proto, of family fam; none for a host-network pod.
func appendNamedPortMembers(members []string, pod *Pod, addrs []netip.Addr, name string, proto Protocol, fam ipfamily.Family) []string {
	if pod.HostNetwork {
		return members
	}
	ports := resolveNamedPort(pod, name, proto)
	if len(ports) == 0 {
		return members
	}
	p, _ := iptablesProtocol(proto)
	for _, ip := range addrs {
		if ip = ip.Unmap(); !ip.IsValid() || ipfamily.OfAddr(ip) != fam {
			continue
		}
		for _, port := range ports {
			members = append(members, ip.String()+","+p+":"+strconv.Itoa(int(port)))
		}
	}
	return members
}

func (r *renderer) addSet(name, typ string, members []string) {
	r.out.IPSets[name] = IPSet{Type: typ, Family: r.fam, Members: sortedMembers(members)}
}

// sortedMembers sorts members in place and drops duplicates; never nil.
func sortedMembers(members []string) []string {
	slices.Sort(members)
	members = slices.Compact(members)
	if members == nil {
		members = []string{}
	}
	return members
}

// IsSetName tells whether name is a policy ipset (of either family), so a writer can find
// stale ones without knowing how they are built.
func IsSetName(name string) bool {
	if !strings.HasPrefix(name, NamePrefix) || len(name) != len(NamePrefix)+3+hashLen {
		return false
	}
	rest := name[len(NamePrefix):]
	switch rest[0] {
	case setKindPods, setKindCIDR, setKindNamedPort, setKindNodes:
	default:
		return false
	}
	return (rest[1] == '4' || rest[1] == '6') && rest[2] == '-'
}
