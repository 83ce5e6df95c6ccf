package cluster

import (
	"context"
	"net/netip"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// keepBlockRoutes routes, from the root namespace, each node's blocks straight to that node until
// ctx ends: the way there when the pods' traffic between nodes is in VXLAN. The route to the whole
// pod network through the first node (routePodsFromHost) is then not the replies' way: the first
// node forwards the API server's packets into VXLAN, the pod's node answers on the subnet, and the
// first node's conntrack, seeing half a connection, drops the rest as INVALID (felix does, as
// Calico's does). Natively the first node's ICMP redirect sends the API server to the pod's node;
// a router that learned the blocks, as a ToR does by BGP, would go there at once too.
func (c *Cluster) keepBlockRoutes(ctx context.Context) {
	nodes := map[string]netip.Addr{}
	for _, n := range c.Nodes {
		nodes[n.Name] = n.IP()
	}
	routed := map[string]string{} // block → the node it is routed to
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		blocks, err := c.Lab.Client.IPAMBlocks().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, b := range blocks.Items {
				node, owned := strings.CutPrefix(b.Spec.Affinity, "host:")
				via, known := nodes[node]
				cidr, perr := netip.ParsePrefix(b.Spec.CIDR)
				if !owned || !known || perr != nil || cidr.Addr().Is4() != via.Is4() || routed[b.Spec.CIDR] == node {
					continue
				}
				if run(ctx, "ip", "route", "replace", b.Spec.CIDR, "via", via.String(), "dev", c.Lab.HostLinkName()) == nil {
					routed[b.Spec.CIDR] = node
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
