// Package vxlanview computes what the nodes' VXLAN devices hold for each other, from the API
// objects alone, read with the parsers the agents use (validation.ParseNode, ParseIPPool,
// ipam.BlockCIDR): per family, each node's VTEP, its device's MAC, its underlay address and the
// blocks routed through it. It is what `tabbyctl node dataplane` prints: where a node's pods are
// unreachable over VXLAN, the row shows what is missing.
package vxlanview

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

// Devices are the VXLAN devices' names, by family.
var Devices = ipfamily.PairOf("vxlan.tabby", "vxlan-v6.tabby")

// Peer is one node as the other nodes' VXLAN device of a family reaches it.
type Peer struct {
	Node string `json:"node"`
	// VTEP, MAC and Underlay are what the other nodes' route, neighbour and FDB entries name;
	// invalid or empty while the node has not published them.
	VTEP     netip.Addr `json:"vtep,omitzero"`
	MAC      string     `json:"mac,omitempty"`
	Underlay netip.Addr `json:"underlay,omitzero"`
	// Blocks are routed to the node through its VTEP: its blocks of the family's VXLAN pools,
	// and the addresses it borrowed in other nodes' blocks of them.
	Blocks []netip.Prefix `json:"blocks"`
	// Native are its CrossSubnet blocks on the viewer's own subnet, routed without VXLAN.
	Native []netip.Prefix `json:"native,omitempty"`
	// Missing says what keeps the other nodes from programming the node's entries.
	Missing []string `json:"missing,omitempty"`
}

// Family is one family's VXLAN peers.
type Family struct {
	Family string `json:"family"`
	Device string `json:"device"`
	Peers  []Peer `json:"peers"`
}

// View is every family that has a VXLAN pool; Node, when set, is the node it is seen from (its
// own row is left out, and CrossSubnet is decided from its subnet).
type View struct {
	Node     string   `json:"node,omitempty"`
	Families []Family `json:"families"`
}

// Parse reads the API objects as the agents read them; invalid pools and blocks are left out,
// as the agents leave them out.
func Parse(nodes []corev1.Node, pools []v1.IPPool, blocks []v1.IPAMBlock) ([]model.Node, []model.Pool, []model.Block) {
	var ns []model.Node
	for i := range nodes {
		n, _ := validation.ParseNode(&nodes[i])
		ns = append(ns, n)
	}
	var ps []model.Pool
	for i := range pools {
		if p, errs := validation.ParseIPPool(&pools[i]); len(errs) == 0 {
			ps = append(ps, p)
		}
	}
	var bs []model.Block
	for i := range blocks {
		b := &blocks[i]
		cidr, err := ipam.BlockCIDR(b)
		if err != nil {
			continue
		}
		mb := model.Block{CIDR: cidr}
		if node, ok := strings.CutPrefix(b.Spec.Affinity, v1.AffinityPrefixHost); ok {
			mb.Node = node
		}
		for ord, a := range b.Spec.Allocations {
			o, err := ipam.ParseOrdinal(cidr, ord)
			if err != nil {
				continue
			}
			if a.Node != "" && a.Node != mb.Node {
				mb.Borrowed = append(mb.Borrowed, model.Borrowed{Addr: ipam.AddrAt(cidr, o), Node: a.Node})
			}
		}
		bs = append(bs, mb)
	}
	return ns, ps, bs
}

// Compute is the view from node viewer ("" for the whole cluster).
func Compute(nodes []model.Node, pools []model.Pool, blocks []model.Block, viewer string) View {
	view := View{Node: viewer}
	byName := map[string]model.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, fam := range ipfamily.All {
		var vxlan []model.Pool
		for _, p := range pools {
			if p.Family() == fam && p.VXLAN() {
				vxlan = append(vxlan, p)
			}
		}
		if len(vxlan) == 0 {
			continue
		}
		poolOf := func(p netip.Prefix) (model.Pool, bool) {
			i := slices.IndexFunc(vxlan, func(pl model.Pool) bool { return pl.CIDR.Overlaps(p) && pl.CIDR.Bits() <= p.Bits() })
			if i < 0 {
				return model.Pool{}, false
			}
			return vxlan[i], true
		}
		var viewerNet netip.Prefix
		if v, ok := byName[viewer]; ok {
			viewerNet = v.BGPAddress.Get(fam).Masked()
		}
		peers := map[string]*Peer{}
		peer := func(name string) *Peer {
			p := peers[name]
			if p == nil {
				n := byName[name]
				p = &Peer{Node: name, VTEP: n.VXLANTunnelAddr.Get(fam), Underlay: n.BGPAddress.Get(fam).Addr(), Blocks: []netip.Prefix{}}
				if mac := n.VXLANMAC.Get(fam); !mac.IsZero() {
					p.MAC = mac.String()
				}
				peers[name] = p
			}
			return p
		}
		route := func(node string, dst netip.Prefix, pool model.Pool) {
			if node == "" || node == viewer {
				return
			}
			p := peer(node)
			// CrossSubnet as felix decides it: the next hop within this node's subnet.
			if pool.VXLANMode == v1.VXLANModeCrossSubnet && viewerNet.IsValid() && viewerNet.Contains(p.Underlay) {
				p.Native = append(p.Native, dst)
				return
			}
			p.Blocks = append(p.Blocks, dst)
		}
		for _, b := range blocks {
			pool, ok := poolOf(b.CIDR)
			if !ok {
				continue
			}
			route(b.Node, b.CIDR, pool)
			for _, a := range b.Borrowed {
				route(a.Node, ipfamily.HostPrefix(a.Addr), pool)
			}
		}
		for _, n := range nodes {
			if n.Name != viewer && n.VXLANTunnelAddr.Get(fam).IsValid() {
				peer(n.Name)
			}
		}
		f := Family{Family: fam.String(), Device: Devices.Get(fam), Peers: []Peer{}}
		for _, p := range peers {
			slices.SortFunc(p.Blocks, ipfamily.ComparePrefixes)
			slices.SortFunc(p.Native, ipfamily.ComparePrefixes)
			p.Missing = missing(*p, byName, fam)
			f.Peers = append(f.Peers, *p)
		}
		slices.SortFunc(f.Peers, func(a, b Peer) int { return cmp.Compare(a.Node, b.Node) })
		view.Families = append(view.Families, f)
	}
	return view
}

// missing says what the other nodes lack to reach p's blocks over VXLAN.
func missing(p Peer, nodes map[string]model.Node, fam ipfamily.Family) []string {
	var out []string
	if _, ok := nodes[p.Node]; !ok {
		return []string{"its Node is gone (its blocks wait for IPAM's garbage collection)"}
	}
	if len(p.Blocks) == 0 {
		return nil // nothing goes through its VTEP
	}
	addrKey, macKey, bgpKey := v1.AnnotationVXLANIPv4TunnelAddress, v1.AnnotationVXLANIPv4MAC, v1.AnnotationBGPIPv4Address
	if fam == ipfamily.IPv6 {
		addrKey, macKey, bgpKey = v1.AnnotationVXLANIPv6TunnelAddress, v1.AnnotationVXLANIPv6MAC, v1.AnnotationBGPIPv6Address
	}
	if !p.VTEP.IsValid() {
		out = append(out, "no VTEP ("+addrKey+")")
	}
	if p.MAC == "" {
		out = append(out, "no MAC ("+macKey+")")
	}
	if !p.Underlay.IsValid() {
		out = append(out, "no underlay address ("+bgpKey+")")
	}
	return out
}

// Print writes the view as one table per family.
func Print(w io.Writer, v View) error {
	if len(v.Families) == 0 {
		_, err := fmt.Fprintln(w, "No VXLAN pool: no node reaches another through VXLAN.")
		return err
	}
	for i, f := range v.Families {
		if i > 0 {
			fmt.Fprintln(w)
		}
		title := fmt.Sprintf("%s VXLAN (%s)", f.Family, f.Device)
		if v.Node != "" {
			title += " as node " + v.Node + " programs it"
		}
		fmt.Fprintln(w, title)
		if len(f.Peers) == 0 {
			fmt.Fprintln(w, "No VXLAN peers.")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		header := []string{"NODE", "VTEP", "MAC", "UNDERLAY", "BLOCKS"}
		if v.Node != "" {
			header = append(header, "NATIVE")
		}
		fmt.Fprintln(tw, strings.Join(append(header, "MISSING"), "\t"))
		for _, p := range f.Peers {
			row := []string{p.Node, addrOrDash(p.VTEP), orDash(p.MAC), addrOrDash(p.Underlay), prefixes(p.Blocks)}
			if v.Node != "" {
				row = append(row, prefixes(p.Native))
			}
			fmt.Fprintln(tw, strings.Join(append(row, orDash(strings.Join(p.Missing, "; "))), "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func addrOrDash(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	return a.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func prefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "-"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
