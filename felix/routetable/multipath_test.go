package routetable

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
)

func ecmpRoute(dst string, hops ...calc.NextHop) calc.Route {
	return calc.NewMultipath(netip.MustParsePrefix(dst), calc.KindRemote, hops)
}

func hop(gw, dev string) calc.NextHop {
	return calc.NextHop{Gw: netip.MustParseAddr(gw), Dev: dev}
}

// A multipath route is programmed with every next hop, compared with the kernel's whatever order
// either lists them in, repaired when someone takes a next hop away, and replaced when the
// paths change.
func TestMultipathRoute(t *testing.T) {
	r := newRig(t)
	r.fake.AddLink("eth1", 1500)
	two := ecmpRoute("0.0.0.0/0", hop("198.51.100.2", "eth1"), hop("198.51.100.1", "eth0"))
	r.rt.SetRoute(ClassLearned, two)
	if res := r.apply(); res.Replaced != 1 || len(res.Failed) != 0 {
		t.Fatalf("first apply %+v", res)
	}
	got, ok := r.fake.Route("0.0.0.0/0")
	if !ok || len(got.MultiPath) != 2 {
		t.Fatalf("kernel:\n%s", r.fake)
	}

	// The same next hops, in the other order: nothing to write.
	r.rt.SetRoute(ClassLearned, ecmpRoute("0.0.0.0/0", hop("198.51.100.1", "eth0"), hop("198.51.100.2", "eth1")))
	r.rt.QueueResync()
	if res := r.apply(); res.Replaced != 0 {
		t.Fatalf("same route in another order rewritten: %+v", res)
	}

	// The kernel lists them in another order (a dump, an event): still the same route.
	reversed := got
	reversed.MultiPath = []*netlink.NexthopInfo{got.MultiPath[1], got.MultiPath[0]}
	r.fake.InjectRoute(reversed)
	if res := r.apply(); res.Replaced != 0 {
		t.Fatalf("kernel's order taken for a change: %+v", res)
	}

	// Someone leaves one path: repaired.
	drift := got
	drift.MultiPath = got.MultiPath[:1]
	r.fake.InjectRoute(drift)
	if res := r.apply(); res.Replaced != 1 {
		t.Fatalf("drift not repaired: %+v\n%s", res, r.fake)
	}
	if got, _ := r.fake.Route("0.0.0.0/0"); len(got.MultiPath) != 2 {
		t.Fatalf("kernel after repair:\n%s", r.fake)
	}

	// One path goes: a plain route to the other.
	r.rt.SetRoute(ClassLearned, ecmpRoute("0.0.0.0/0", hop("198.51.100.2", "eth1")))
	if res := r.apply(); res.Replaced != 1 {
		t.Fatalf("single path: %+v", res)
	}
	if got, _ := r.fake.Route("0.0.0.0/0"); len(got.MultiPath) != 0 || !got.Gw.Equal(net.ParseIP("198.51.100.2")) {
		t.Fatalf("kernel with one path:\n%s", r.fake)
	}

	// Back to both, then a link of one path is deleted: the kernel drops the route and the
	// table puts back what it can (nothing: eth1 is gone, the route is reported).
	r.rt.SetRoute(ClassLearned, two)
	r.apply()
	r.fake.DelLink("eth1")
	res := r.apply()
	if len(res.Failed) != 1 || r.has("0.0.0.0/0") {
		t.Fatalf("after eth1 went: %+v\n%s", res, r.fake)
	}
	r.rt.RemoveRoute(ClassLearned, netip.MustParsePrefix("0.0.0.0/0"))
	if res := r.apply(); len(res.Failed) != 0 {
		t.Fatalf("after removal: %+v", res)
	}
}

// TestMultipathInRealKernel: IPv4 and IPv6 multipath routes as the kernel keeps them (IPv6's
// as sibling routes it lists as one): programmed, found equal on a resync, narrowed to one path
// and widened again, then deleted.
func TestMultipathInRealKernel(t *testing.T) {
	h := realNS(t, "eth0", "eth1")
	for name, addrs := range map[string][]string{"eth0": {"198.51.100.10/25", "2001:db8:1::10/64"}, "eth1": {"198.51.100.130/25", "2001:db8:2::10/64"}} {
		l, _ := h.LinkByName(name)
		for _, a := range addrs {
			if err := h.AddrReplace(l, &netlink.Addr{IPNet: ipnet(a), Flags: unix.IFA_F_NODAD}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rt := New(h, Options{Protocol: proto})
	// The kernel's route events reach the table as felix's loop hands them over: what the
	// kernel says of a multipath route it was just given must not look like a change.
	routes, links := make(chan netlink.RouteUpdate, 1000), make(chan netlink.LinkUpdate, 100)
	done := make(chan struct{})
	defer close(done)
	if err := h.Subscribe(done, routes, links, nil); err != nil {
		t.Fatal(err)
	}
	eth0, _ := h.LinkByName("eth0")
	sentinel := &netlink.Route{Dst: ipnet("198.51.100.99/32"), LinkIndex: eth0.Attrs().Index, Scope: netlink.SCOPE_LINK, Protocol: 99}
	// events hands the table every event so far: a route of its own, added and deleted, comes
	// after all of them.
	events := func() {
		t.Helper()
		if err := h.RouteReplace(sentinel); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.RouteDel(sentinel) }()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case u := <-routes:
				if u.Protocol == 99 {
					if u.Type == unix.RTM_NEWROUTE {
						return
					}
					continue // the last call's
				}
				rt.OnRouteUpdate(u)
			case <-links:
			case <-timeout:
				t.Fatal("no route event for the sentinel route")
			}
		}
	}
	kernel := func(family int, dst string) []string {
		t.Helper()
		var out []string
		if err := h.RouteListFilteredIter(family, &netlink.Route{Protocol: proto}, netlink.RT_FILTER_PROTOCOL, func(r netlink.Route) bool {
			if r.Dst == nil && (dst == "0.0.0.0/0" || dst == "::/0") || r.Dst != nil && r.Dst.String() == dst {
				if len(r.MultiPath) == 0 {
					out = append(out, r.Gw.String())
				}
				for _, h := range r.MultiPath {
					out = append(out, h.Gw.String())
				}
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		family   int
		dst      string
		gw0, gw1 string
	}{
		{unix.AF_INET, "203.0.113.0/24", "198.51.100.1", "198.51.100.129"},
		{unix.AF_INET6, "2001:db8:ff::/48", "2001:db8:1::1", "2001:db8:2::1"},
	} {
		both := ecmpRoute(tc.dst, hop(tc.gw0, "eth0"), hop(tc.gw1, "eth1"))
		one := ecmpRoute(tc.dst, hop(tc.gw1, "eth1"))
		for i, want := range []calc.Route{both, one, both} {
			rt.SetRoute(ClassLearned, want)
			if res, err := rt.Apply(); err != nil {
				t.Fatalf("%s step %d: %v (%+v)", tc.dst, i, err, res.Failed)
			}
			wantGws := []string{tc.gw1}
			if len(want.Multipath) > 0 {
				wantGws = []string{tc.gw0, tc.gw1}
			}
			if got := kernel(tc.family, tc.dst); !slices.Equal(got, wantGws) {
				t.Fatalf("%s step %d: kernel has next hops %v, want %v", tc.dst, i, got, wantGws)
			}
			events()
			if res, err := rt.Apply(); err != nil || res.Replaced != 0 {
				t.Fatalf("%s step %d: the kernel's events made the table rewrite %d routes (%v)", tc.dst, i, res.Replaced, err)
			}
			// What the kernel lists is what the table wanted: a resync writes nothing.
			rt.QueueResync()
			if res, err := rt.Apply(); err != nil || res.Replaced != 0 {
				t.Fatalf("%s step %d: resync rewrote %d routes (%v)", tc.dst, i, res.Replaced, err)
			}
		}
		rt.RemoveRoute(ClassLearned, netip.MustParsePrefix(tc.dst))
		if res, err := rt.Apply(); err != nil || res.Deleted == 0 {
			t.Fatalf("%s: delete %+v %v", tc.dst, res, err)
		}
		if got := kernel(tc.family, tc.dst); len(got) != 0 {
			t.Fatalf("%s: left in the kernel: %v", tc.dst, got)
		}
	}
}
