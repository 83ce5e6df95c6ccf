package lab

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

// Canon renders a route the way the expectations are written: "blackhole 10.244.1.0/26",
// "10.244.1.5/32 dev caliXXX", "10.244.2.0/26 via 198.51.100.12 dev eth0".
func Canon(r Route) string {
	dst := r.Dst
	if a, err := netip.ParseAddr(dst); err == nil {
		dst = netip.PrefixFrom(a, a.BitLen()).String()
	}
	if r.Type == "blackhole" {
		return "blackhole " + dst
	}
	s := dst
	if r.Gateway != "" {
		s += " via " + r.Gateway
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	return s
}

// Blocks maps each node to the IPAM blocks affine to it.
func (l *Lab) Blocks(ctx context.Context) (map[string][]netip.Prefix, error) {
	list, err := l.Client.IPAMBlocks().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	out := map[string][]netip.Prefix{}
	for _, b := range list.Items {
		node, ok := strings.CutPrefix(b.Spec.Affinity, v1.AffinityPrefixHost)
		if !ok {
			continue
		}
		p, err := ipam.BlockCIDR(&b)
		if err != nil {
			return nil, err
		}
		out[node] = append(out[node], p)
	}
	return out, nil
}

// ExpectedRoutes is the set of tabby routes (protocol 201) node n must hold in a cluster
// without IPIP: its pods' /32 on their host veth, a blackhole for each of its blocks, each other
// node's blocks via that node's address on eth0, or via its VTEP on the VXLAN device for a
// VXLAN pool's blocks (vxlanMode Always, or CrossSubnet to a node on another subnet).
func (l *Lab) ExpectedRoutes(ctx context.Context, n *Node) ([]string, error) {
	blocks, err := l.Blocks(ctx)
	if err != nil {
		return nil, err
	}
	modes, err := l.poolModes(ctx)
	if err != nil {
		return nil, err
	}
	// The other nodes' VTEPs, read only for a block of a VXLAN pool: a native cluster's
	// expectations never depend on the Node objects.
	vteps := map[string]model.Node{}
	vtep := func(node string, f ipfamily.Family) (netip.Addr, error) {
		m, ok := vteps[node]
		if !ok {
			var err error
			if m, err = l.NodeModel(ctx, node); err != nil {
				return netip.Addr{}, err
			}
			vteps[node] = m
		}
		return m.VXLANTunnelAddr.Get(f), nil
	}
	var want []string
	for _, p := range l.Pods() {
		if p.Node != n {
			continue
		}
		veth := names.HostVethName(p.Namespace, p.Name, p.ContainerID)
		for _, a := range p.Addrs() {
			want = append(want, fmt.Sprintf("%s dev %s", netip.PrefixFrom(a, a.BitLen()), veth))
		}
	}
	for node, bs := range blocks {
		other := l.Node(node)
		for _, b := range bs {
			switch {
			case node == n.Name:
				want = append(want, "blackhole "+b.String())
			case other != nil:
				r, err := blockRoute(b, n, other, modes, vtep)
				if err != nil {
					return nil, err
				}
				if r != "" {
					want = append(want, r)
				}
			}
		}
	}
	sort.Strings(want)
	return want, nil
}

// CheckRoutes compares the node's tabby routes with ExpectedRoutes; the error shows the
// difference.
func (l *Lab) CheckRoutes(ctx context.Context, n *Node) error {
	want, err := l.ExpectedRoutes(ctx, n)
	if err != nil {
		return err
	}
	rs, err := n.TabbyRoutes(ctx)
	if err != nil {
		return err
	}
	if n.Addr6.IsValid() {
		rs6, err := n.TabbyRoutes6(ctx)
		if err != nil {
			return err
		}
		rs = append(rs, rs6...)
	}
	got := make([]string, len(rs))
	for i, r := range rs {
		got[i] = Canon(r)
	}
	sort.Strings(got)
	if slices.Equal(got, want) {
		return nil
	}
	return fmt.Errorf("node %s tabby routes differ:\n missing: %v\n extra:   %v", n.Name, diff(want, got), diff(got, want))
}

func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
