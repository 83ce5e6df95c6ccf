package routetable

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/felix/calc"
)

// Class says who wants a route: each class is one manager's. Where two classes want the same
// prefix, the lowest class's route is programmed and the others wait behind it, the next one
// taking over when it is removed. A manager adding routes of a new kind picks a class of its
// own, placed among these by what must win over what.
type Class uint8

const (
	// ClassWorkload: a local pod's host route on its veth.
	ClassWorkload Class = 10
	// ClassBlackhole: the blackhole of a block affine to this node. Below the pods' own routes
	// and above anything learned: a node's own addresses never route away from it.
	ClassBlackhole Class = 20
	// ClassVXLAN: a route to another node's block or borrowed address of a VXLAN pool, from the
	// datastore (felix/vxlan). Below the local routes, and above what BGP learns: where BGP runs
	// too, the route the datastore gives a VXLAN pool's prefix is the one used.
	ClassVXLAN Class = 25
	// ClassLearned: a route to another node's block or borrowed address, learned from BGP.
	ClassLearned Class = 30
)

// Writer is the route table as the managers feed it, as they feed the iptables tables: each
// states and withdraws the routes of its own class, and the table programs, for each prefix,
// the route of the best class that wants one. Routes are written to the kernel by the next
// Apply, once for all managers.
type Writer interface {
	// SetRoute makes r (to r.Dst, masked) class c's route.
	SetRoute(c Class, r calc.Route)
	// RemoveRoute withdraws class c's route to dst, if it has one.
	RemoveRoute(c Class, dst netip.Prefix)
}

var _ Writer = (*RouteTable)(nil)

// wish is one class's route to a prefix.
type wish struct {
	class Class
	route calc.Route
}

// SetRoute records class c's route and marks the prefix dirty when what is programmed there
// changes.
func (t *RouteTable) SetRoute(c Class, r calc.Route) {
	r.Dst = r.Dst.Masked()
	dst := r.Dst
	cur, had := t.desired[dst]
	switch {
	case !had:
		t.install(dst, wish{c, r}, nil)
	case cur.class == c:
		if !cur.route.Equal(r) {
			t.install(dst, wish{c, r}, &cur)
		}
	case c < cur.class:
		t.wait(dst, cur)
		t.install(dst, wish{c, r}, &cur)
	default:
		t.wait(dst, wish{c, r})
	}
}

// RemoveRoute withdraws class c's route to dst. When it was the programmed one, the next class
// waiting takes over; when none waits, the route is released: Apply deletes it at once,
// without the grace period of a route felix never knew, unless deletes are held.
func (t *RouteTable) RemoveRoute(c Class, dst netip.Prefix) {
	dst = dst.Masked()
	cur, had := t.desired[dst]
	if !had {
		return
	}
	if cur.class != c {
		t.unwait(dst, c)
		return
	}
	if next, ok := t.unwaitFirst(dst); ok {
		t.install(dst, next, &cur)
		return
	}
	t.kinds[cur.route.Kind]--
	for _, dev := range cur.route.Devs() {
		t.unindexDev(dst, dev)
	}
	delete(t.desired, dst)
	t.dirty.Add(dst)
	t.released[dst] = struct{}{}
}

// install makes w the programmed route at dst in place of old (nil: none).
func (t *RouteTable) install(dst netip.Prefix, w wish, old *wish) {
	if old != nil {
		t.kinds[old.route.Kind]--
		for _, dev := range old.route.Devs() {
			t.unindexDev(dst, dev)
		}
	}
	t.kinds[w.route.Kind]++
	for _, dev := range w.route.Devs() {
		t.indexDev(dst, dev)
	}
	t.desired[dst] = w
	if old == nil || !old.route.Equal(w.route) {
		t.dirty.Add(dst)
	}
	delete(t.released, dst)
}

// wait records w behind the programmed route at dst, replacing its class's earlier one.
func (t *RouteTable) wait(dst netip.Prefix, w wish) {
	ws := t.waiting[dst]
	i, found := slices.BinarySearchFunc(ws, w.class, func(x wish, c Class) int { return int(x.class) - int(c) })
	if found {
		ws[i] = w
		return
	}
	t.waiting[dst] = slices.Insert(ws, i, w)
}

func (t *RouteTable) unwait(dst netip.Prefix, c Class) {
	ws := t.waiting[dst]
	i := slices.IndexFunc(ws, func(x wish) bool { return x.class == c })
	if i < 0 {
		return
	}
	if len(ws) == 1 {
		delete(t.waiting, dst)
		return
	}
	t.waiting[dst] = slices.Delete(ws, i, i+1)
}

// unwaitFirst takes the best class's route waiting at dst.
func (t *RouteTable) unwaitFirst(dst netip.Prefix) (wish, bool) {
	ws := t.waiting[dst]
	if len(ws) == 0 {
		return wish{}, false
	}
	w := ws[0]
	t.unwait(dst, w.class)
	return w, true
}
