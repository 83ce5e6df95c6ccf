package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/ipam"
)

// rebootNode is the node the reboot row powers off and on: a third node, so that the
// monitor's pods stay up and what the row measures of them is what the others felt.
const rebootNode = "node-3"

// addRebootNode adds rebootNode and two pods on it, before the row's window.
func (c *Campaign) addRebootNode(ctx context.Context) error {
	if c.Lab.Node(rebootNode) != nil {
		return nil
	}
	if _, err := c.Lab.AddNodes(ctx, lab.NodeSpec{Name: rebootNode}); err != nil {
		return err
	}
	_, err := c.Lab.AddPods(ctx, lab.PodSpec{Name: "reboot-a", Node: rebootNode}, lab.PodSpec{Name: "reboot-b", Node: rebootNode})
	return err
}

// reboot cuts the power of rebootNode, waits until the other nodes have dropped its routes
// (its sessions time out: it sent nothing), boots it, restarts its pods with new sandboxes
// as the kubelet would and adds a new one, and checks that every one of them is reachable,
// that the old sandboxes' addresses were released (IPAM GC) or taken again, and every node's
// routes are the datastore's.
func (c *Campaign) reboot(ctx context.Context, hold time.Duration) (time.Time, string, error) {
	n := c.Lab.Node(rebootNode)
	if n == nil {
		return time.Time{}, "", fmt.Errorf("no node %s", rebootNode)
	}
	oldIPs := map[netip.Addr]bool{}
	for _, p := range c.Lab.Pods() {
		if p.Node == n {
			for _, a := range p.Addrs() {
				oldIPs[a] = true
			}
		}
	}
	old, err := c.Lab.PowerOff(ctx, rebootNode)
	if err != nil {
		return time.Time{}, "", err
	}
	cut := time.Now()
	var others []*lab.Node
	for _, o := range c.Lab.Nodes() {
		if o != n {
			others = append(others, o)
		}
	}
	limit := hold + 10*time.Second
	var gone time.Duration
	for _, o := range others {
		err := lab.Eventually(ctx, limit+20*time.Second, func(ctx context.Context) error {
			via, err := routesVia(ctx, o, n)
			if err != nil {
				return err
			}
			if len(via) > 0 {
				return fmt.Errorf("%s still routes %s via %s", o.Name, strings.Join(via, ", "), n.Name)
			}
			return nil
		})
		if err != nil {
			return time.Time{}, "", fmt.Errorf("after the power cut of %s: %w", n.Name, err)
		}
		gone = max(gone, time.Since(cut))
	}
	note := fmt.Sprintf("the other nodes dropped %s's routes %s after the power cut", n.Name, gone.Round(100*time.Millisecond))
	var errs []error
	if gone > limit {
		errs = append(errs, fmt.Errorf("%s's routes were withdrawn %s after the cut, want within the hold time (%s) and %s of slack",
			n.Name, gone.Round(100*time.Millisecond), hold, limit-hold))
	}
	healed := time.Now()
	if err := c.Lab.PowerOn(ctx, rebootNode); err != nil {
		return healed, note, err
	}
	ready := time.Since(healed)
	var pods []*lab.Pod
	for _, p := range old {
		np, err := c.Lab.RestartPod(ctx, p)
		if err != nil {
			return healed, note, err
		}
		pods = append(pods, np)
	}
	fresh, err := c.Lab.AddPod(ctx, lab.PodSpec{Name: c.name("after-reboot"), Node: rebootNode})
	if err != nil {
		return healed, note, err
	}
	pods = append(pods, fresh)
	client := c.Pairs[0].Client
	reused := 0
	for _, p := range pods {
		for _, a := range p.Addrs() {
			if oldIPs[a] {
				reused++
				delete(oldIPs, a)
			}
			if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error { return lab.Ping(ctx, client.NS, a) }); err != nil {
				errs = append(errs, fmt.Errorf("pod %s on %s after its reboot: %s unreachable: %w", p.Key(), n.Name, a, err))
			}
		}
	}
	reachable := time.Since(healed)
	released := time.Now()
	if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error { return c.stillAllocated(ctx, oldIPs) }); err != nil {
		errs = append(errs, fmt.Errorf("the old sandboxes' addresses after %s's reboot: %w", n.Name, err))
	}
	note += fmt.Sprintf("; booted: tabby-node ready in %s, %d pods restarted and 1 added, all reachable %s after the boot; "+
		"of the old sandboxes' %d addresses %d taken again, the others released %s later",
		ready.Round(100*time.Millisecond), len(old), reachable.Round(100*time.Millisecond), len(oldIPs)+reused, reused,
		time.Since(released).Round(100*time.Millisecond))
	if err := c.Lab.DeletePod(ctx, fresh.Key()); err != nil {
		errs = append(errs, err)
	}
	for _, o := range c.Lab.Nodes() {
		if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error { return c.Lab.CheckRoutes(ctx, o) }); err != nil {
			errs = append(errs, err)
		}
	}
	return healed, note, errors.Join(errs...)
}

// routesVia are o's tabby routes whose next hop is one of n's addresses.
func routesVia(ctx context.Context, o, n *lab.Node) ([]string, error) {
	rs, err := o.TabbyRoutes(ctx)
	if err != nil {
		return nil, err
	}
	rs6, err := o.TabbyRoutes6(ctx)
	if err != nil {
		return nil, err
	}
	var via []string
	for _, r := range append(rs, rs6...) {
		if r.Gateway == n.IP().String() || n.Addr6.IsValid() && r.Gateway == n.IP6().String() {
			via = append(via, r.Dst)
		}
	}
	return via, nil
}

// stillAllocated fails while IPAM holds one of addrs.
func (c *Campaign) stillAllocated(ctx context.Context, addrs map[netip.Addr]bool) error {
	blocks, err := c.Lab.Client.IPAMBlocks().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var held []string
	for _, b := range blocks.Items {
		cidr, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			return err
		}
		for a := range addrs {
			o, ok := ipam.OrdinalOf(cidr, a)
			if !ok {
				continue
			}
			if al, ok := b.Spec.Allocations[ipam.OrdinalKey(o)]; ok {
				held = append(held, fmt.Sprintf("%s (%s/%s)", a, al.Namespace, al.Pod))
			}
		}
	}
	if len(held) > 0 {
		slices.Sort(held)
		return fmt.Errorf("still allocated: %s", strings.Join(held, ", "))
	}
	return nil
}
