package e2e

import (
	"net/netip"

	"github.com/tabbynet/tabby/hack/lab"
)

// peersExcept are the addresses of all nodes but one (a full mesh's sessions).
func peersExcept(nodes []*lab.Node, self *lab.Node) []netip.Addr {
	var out []netip.Addr
	for _, n := range nodes {
		if n != self {
			out = append(out, n.IP())
		}
	}
	return out
}

// ips are the nodes' addresses.
func ips(nodes ...*lab.Node) []netip.Addr {
	out := make([]netip.Addr, len(nodes))
	for i, n := range nodes {
		out[i] = n.IP()
	}
	return out
}
