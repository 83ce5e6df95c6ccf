package felix

// Deprecated: this file is to be deleted when tabby-node sends felix the node syncer's stream
// of model changes itself. Until then, its whole-list setters turn what tabby-node hands them
// into those changes, by difference with the previous call, and push them through OnUpdate:
// felix has one input path, and an unchanged list sends nothing (and wakes nothing).

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Pool is an IPPool as the setters take it.
//
// Deprecated: send model.PoolUpdate and model.PoolRemove.
type Pool = model.Pool

// BGPRoute is a learned route as UpsertBGPRoute takes it.
//
// Deprecated: send model.RouteUpdate.
type BGPRoute = model.RouteUpdate

// Workload is one address of a pod on this node and its host veth.
//
// Deprecated: send model.WorkloadUpdate and model.WorkloadRemove.
type Workload struct {
	IP        netip.Addr
	Interface string
}

// legacyInputs is what the setters were last given.
type legacyInputs struct {
	mu       sync.Mutex
	node     model.Node
	nodeSent bool
	pools    map[string]model.Pool
	blocks   map[netip.Prefix]struct{}
	// workloads indexes the last list by address, dups holds its entries whose address an
	// earlier entry has (two pods claiming one address, rare), and spare is the index before,
	// reused: a node's list is compared on every pod change.
	workloads, spare map[netip.Addr]string
	dups             []Workload
}

// SetLocalNode sets the node's BGP address with its subnet (198.51.100.11/24) and its tunnel
// address (invalid when none).
//
// Deprecated: send model.NodeUpdate for Config.NodeName.
func (f *Felix) SetLocalNode(bgpAddr netip.Prefix, tunnelAddr netip.Addr) {
	f.setLegacyNode(func(n *model.Node) {
		n.BGPAddress.Set(ipfamily.IPv4, bgpAddr)
		n.IPIPTunnelAddr = tunnelAddr
	})
}

// SetLocalNode6 sets the node's IPv6 BGP address with its subnet (2001:db8:100::11/64), invalid
// when the node has none.
//
// Deprecated: send model.NodeUpdate for Config.NodeName.
func (f *Felix) SetLocalNode6(bgpAddr netip.Prefix) {
	f.setLegacyNode(func(n *model.Node) { n.BGPAddress.Set(ipfamily.IPv6, bgpAddr) })
}

func (f *Felix) setLegacyNode(change func(*model.Node)) {
	l := &f.legacy
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.node
	n.Name = f.cfg.NodeName
	change(&n)
	if l.nodeSent && n.Equal(l.node) {
		return
	}
	l.node, l.nodeSent = n, true
	f.OnUpdate(model.NodeUpdate{Node: n})
}

// SetPools sets every IPPool.
//
// Deprecated: send model.PoolUpdate and model.PoolRemove.
func (f *Felix) SetPools(pools []Pool) {
	l := &f.legacy
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := make(map[string]model.Pool, len(pools))
	for _, p := range pools {
		cur[p.Name] = p
	}
	var msgs []any
	for _, p := range pools {
		if old, ok := l.pools[p.Name]; !ok || !samePool(old, p) {
			msgs = append(msgs, model.PoolUpdate{Pool: p})
		}
	}
	for name := range l.pools {
		if _, ok := cur[name]; !ok {
			msgs = append(msgs, model.PoolRemove{Name: name})
		}
	}
	l.pools = cur
	f.updates.push(msgs...)
}

// samePool compares what a pool says, its parsed selector aside (an interface that may not be
// comparable; its text is compared).
func samePool(a, b model.Pool) bool {
	a.Selector, b.Selector = nil, nil
	return a == b
}

// SetLocalBlocks sets the blocks affine to this node.
//
// Deprecated: send model.BlockUpdate and model.BlockRemove.
func (f *Felix) SetLocalBlocks(blocks []netip.Prefix) {
	l := &f.legacy
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := make(map[netip.Prefix]struct{}, len(blocks))
	var msgs []any
	for _, b := range blocks {
		cur[b] = struct{}{}
		if _, ok := l.blocks[b]; !ok {
			msgs = append(msgs, model.BlockUpdate{Block: model.Block{CIDR: b, Node: f.cfg.NodeName}})
		}
	}
	for b := range l.blocks {
		if _, ok := cur[b]; !ok {
			msgs = append(msgs, model.BlockRemove{CIDR: b})
		}
	}
	l.blocks = cur
	f.updates.push(msgs...)
}

// SetWorkloads sets the full set of this node's workloads. Only the veths whose addresses
// changed are sent, each with all its addresses.
//
// Deprecated: send model.WorkloadUpdate and model.WorkloadRemove.
func (f *Felix) SetWorkloads(ws []Workload) {
	l := &f.legacy
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.spare
	if cur == nil {
		cur = make(map[netip.Addr]string, len(ws))
	}
	clear(cur)
	var dups []Workload
	var touched map[string]struct{}
	touch := func(iface string) {
		if touched == nil {
			touched = map[string]struct{}{}
		}
		touched[iface] = struct{}{}
	}
	kept := 0
	for _, w := range ws {
		if first, dup := cur[w.IP]; dup {
			if first != w.Interface && !slices.Contains(dups, w) {
				dups = append(dups, w)
			}
			continue
		}
		cur[w.IP] = w.Interface
		was, had := l.workloads[w.IP]
		if had && was == w.Interface {
			kept++
			continue
		}
		if had {
			touch(was)
		}
		touch(w.Interface)
	}
	// Every address of the last list is still on its veth (a pod was added): no pass over it.
	// This is the hot path of a new pod on a node with thousands.
	if kept < len(l.workloads) {
		for ip, was := range l.workloads {
			if now, ok := cur[ip]; !ok || now != was {
				touch(was)
			}
		}
	}
	for _, w := range dups {
		if !slices.Contains(l.dups, w) {
			touch(w.Interface)
		}
	}
	for _, w := range l.dups {
		if !slices.Contains(dups, w) {
			touch(w.Interface)
		}
	}
	l.workloads, l.spare, l.dups = cur, l.workloads, dups
	if touched == nil {
		return
	}
	ips := make(map[string][]netip.Addr, len(touched))
	for _, w := range ws {
		if _, ok := touched[w.Interface]; ok && !slices.Contains(ips[w.Interface], w.IP) {
			ips[w.Interface] = append(ips[w.Interface], w.IP)
		}
	}
	msgs := make([]any, 0, len(touched))
	for iface := range touched {
		if a := ips[iface]; len(a) > 0 {
			slices.SortFunc(a, netip.Addr.Compare)
			msgs = append(msgs, model.WorkloadUpdate{Workload: model.Workload{Interface: iface, IPs: a}})
		} else {
			msgs = append(msgs, model.WorkloadRemove{Interface: iface})
		}
	}
	f.updates.push(msgs...)
}

// UpsertBGPRoute records a route learned from BGP.
//
// Deprecated: send model.RouteUpdate.
func (f *Felix) UpsertBGPRoute(r BGPRoute) { f.OnUpdate(r) }

// DeleteBGPRoute forgets a withdrawn route.
//
// Deprecated: send model.RouteRemove.
func (f *Felix) DeleteBGPRoute(prefix netip.Prefix) { f.OnUpdate(model.RouteRemove{Prefix: prefix}) }

// SetInSync tells felix that its inputs are complete (the datastore has synced and BGP has
// re-learned its routes).
//
// Deprecated: send model.InSync, after the changes it vouches for.
func (f *Felix) SetInSync() { f.OnUpdate(model.InSync{}) }
