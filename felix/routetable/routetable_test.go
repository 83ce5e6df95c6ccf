package routetable

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/nl"
)

const proto = 201

type rig struct {
	t      *testing.T
	fake   *nl.Fake
	rt     *RouteTable
	now    time.Time
	routes chan netlink.RouteUpdate
	links  chan netlink.LinkUpdate
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, fake: nl.NewFake(), now: time.Unix(1000, 0),
		routes: make(chan netlink.RouteUpdate, 100000), links: make(chan netlink.LinkUpdate, 1000)}
	r.fake.AddLink("eth0", 1500)
	r.fake.AddLink("cali1", 1500)
	r.fake.AddLink("cali2", 1500)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	if err := r.fake.Subscribe(done, r.routes, r.links, nil); err != nil {
		t.Fatal(err)
	}
	r.rt = New(r.fake, Options{Protocol: proto, GracePeriod: 10 * time.Second,
		IsWorkloadInterface: func(n string) bool { return strings.HasPrefix(n, "cali") },
		Now:                 func() time.Time { return r.now }})
	return r
}

// drain feeds the table the events the fake kernel emitted, as felix's loop does.
func (r *rig) drain() {
	for {
		select {
		case u := <-r.routes:
			r.rt.OnRouteUpdate(u)
		case u := <-r.links:
			r.rt.OnLinkUpdate(u)
		default:
			return
		}
	}
}

func (r *rig) apply() Result {
	r.t.Helper()
	r.drain()
	res, _ := r.rt.Apply()
	r.drain()
	return res
}

func (r *rig) has(dst string) bool {
	_, ok := r.fake.Route(dst)
	return ok
}

func ipnet(s string) *net.IPNet {
	_, n, _ := net.ParseCIDR(s)
	return n
}

func desired() map[netip.Prefix]calc.Route {
	m := map[netip.Prefix]calc.Route{}
	add := func(r calc.Route) { m[r.Dst] = r }
	add(calc.Route{Dst: netip.MustParsePrefix("10.244.0.5/32"), Kind: calc.KindWorkload, Dev: "cali1"})
	add(calc.Route{Dst: netip.MustParsePrefix("10.244.0.6/32"), Kind: calc.KindWorkload, Dev: "cali2"})
	add(calc.Route{Dst: netip.MustParsePrefix("10.244.0.0/26"), Kind: calc.KindBlackhole})
	add(calc.Route{Dst: netip.MustParsePrefix("10.244.1.0/26"), Kind: calc.KindRemote, Dev: "eth0", Gw: netip.MustParseAddr("198.51.100.12")})
	return m
}

// classOf is the class felix's managers state a route of this kind in.
func classOf(k calc.Kind) Class {
	switch k {
	case calc.KindWorkload:
		return ClassWorkload
	case calc.KindBlackhole:
		return ClassBlackhole
	}
	return ClassLearned
}

// set states r in its kind's class.
func (r *rig) set(route calc.Route) { r.rt.SetRoute(classOf(route.Kind), route) }

// remove withdraws every class's route to dst.
func (r *rig) remove(dst netip.Prefix) {
	for _, c := range []Class{ClassWorkload, ClassBlackhole, ClassLearned} {
		r.rt.RemoveRoute(c, dst)
	}
}

// setAll makes routes the table's whole desired set, as the managers together would.
func (r *rig) setAll(routes map[netip.Prefix]calc.Route) {
	for dst := range r.rt.DesiredRoutes() {
		if _, ok := routes[dst]; !ok {
			r.remove(dst)
		}
	}
	for _, route := range routes {
		if cur, ok := r.rt.Desired(route.Dst); ok && classOf(cur.Kind) != classOf(route.Kind) {
			r.remove(route.Dst)
		}
		r.set(route)
	}
}

func TestProgramsFromEmptyThenNoop(t *testing.T) {
	r := newRig(t)
	r.setAll(desired())
	res := r.apply()
	if res.Replaced != 4 || len(res.Failed) != 0 {
		t.Fatalf("result %+v\n%s", res, r.fake)
	}
	if res.Programmed[calc.KindWorkload] != 2 || res.Programmed[calc.KindBlackhole] != 1 || res.Programmed[calc.KindRemote] != 1 {
		t.Fatalf("programmed %v", res.Programmed)
	}
	bh, _ := r.fake.Route("10.244.0.0/26")
	if bh.Type != unix.RTN_BLACKHOLE || bh.Protocol != proto {
		t.Fatalf("blackhole route %+v", bh)
	}
	wl, _ := r.fake.Route("10.244.0.5/32")
	if wl.Scope != netlink.SCOPE_LINK || wl.Gw != nil {
		t.Fatalf("workload route %+v", wl)
	}
	// The events of felix's own writes, and a full resync, change nothing.
	batches := r.fake.Calls("RouteBatch")
	r.setAll(desired())
	if res := r.apply(); res.Replaced+res.Deleted != 0 {
		t.Fatalf("second apply wrote: %+v", res)
	}
	r.rt.QueueResync()
	if res := r.apply(); res.Replaced+res.Deleted != 0 {
		t.Fatalf("resync wrote: %+v", res)
	}
	if got := r.fake.Calls("RouteBatch"); got != batches {
		t.Fatalf("no-op applies issued %d batches", got-batches)
	}
}

func TestDriftRepair(t *testing.T) {
	r := newRig(t)
	r.setAll(desired())
	r.apply()
	eth0, _ := r.fake.LinkByName("eth0")

	r.fake.RemoveRoute("10.244.1.0/26")                                                                                         // deleted by hand
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("10.244.7.0/26"), Protocol: proto, Type: unix.RTN_BLACKHOLE})                   // stale tabby
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("10.244.8.0/26"), Protocol: proto, LinkIndex: eth0.Attrs().Index, Priority: 5}) // stale tabby, other metric
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("172.16.0.0/16"), Protocol: unix.RTPROT_STATIC, LinkIndex: eth0.Attrs().Index})
	r.apply()
	if !r.has("10.244.1.0/26") || r.has("10.244.7.0/26") || !r.has("172.16.0.0/16") {
		t.Fatalf("after drift:\n%s", r.fake)
	}
	for _, rt := range r.fake.Routes() {
		if rt.Dst.String() == "10.244.8.0/26" {
			t.Fatalf("stale route with metric 5 kept:\n%s", r.fake)
		}
	}

	// Drift found only by a full resync (events lost).
	r.fake.RemoveRoute("10.244.0.6/32")
	for len(r.routes) > 0 {
		<-r.routes
	}
	r.rt.QueueResync()
	r.apply()
	if !r.has("10.244.0.6/32") {
		t.Fatal("resync did not restore a route whose event was lost")
	}
}

func TestForeignRoutes(t *testing.T) {
	r := newRig(t)
	eth0, _ := r.fake.LinkByName("eth0")
	cali1, _ := r.fake.LinkByName("cali1")
	// A static route to a desired remote block on the uplink: never touched, reported.
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("10.244.1.0/26"), Protocol: unix.RTPROT_STATIC, LinkIndex: eth0.Attrs().Index, Gw: net.ParseIP("198.51.100.99")})
	// A static route to a pod /32 on its cali interface: may be replaced by ours.
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("10.244.0.5/32"), Protocol: unix.RTPROT_STATIC, LinkIndex: cali1.Attrs().Index, Scope: netlink.SCOPE_LINK})
	r.setAll(desired())
	res := r.apply()
	st, _ := r.fake.Route("10.244.1.0/26")
	if st.Protocol != unix.RTPROT_STATIC || !st.Gw.Equal(net.ParseIP("198.51.100.99")) {
		t.Fatalf("foreign route on the uplink was touched: %+v", st)
	}
	if len(res.Failed) != 1 || res.Failed[0].Dst.String() != "10.244.1.0/26" {
		t.Fatalf("conflict not reported: %+v", res.Failed)
	}
	wl, _ := r.fake.Route("10.244.0.5/32")
	if wl.Protocol != proto {
		t.Fatalf("pod route of another protocol on cali not replaced: %+v", wl)
	}
}

func TestGracePeriodForUnknownWorkloadRoute(t *testing.T) {
	r := newRig(t)
	r.setAll(desired())
	r.apply()
	cali2, _ := r.fake.LinkByName("cali2")
	// The CNI plugin adds a pod felix has not heard of yet.
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("10.244.0.9/32"), Protocol: proto, LinkIndex: cali2.Attrs().Index, Scope: netlink.SCOPE_LINK})
	r.apply()
	if !r.has("10.244.0.9/32") {
		t.Fatal("unknown workload route removed inside the grace period")
	}
	if d := r.rt.NextDeadline(); !d.Equal(r.now.Add(10 * time.Second)) {
		t.Fatalf("next deadline %v", d)
	}
	r.now = r.now.Add(9 * time.Second)
	r.apply()
	if !r.has("10.244.0.9/32") {
		t.Fatal("removed before the grace period ended")
	}
	r.now = r.now.Add(time.Second)
	r.apply()
	if r.has("10.244.0.9/32") {
		t.Fatal("unknown workload route survived the grace period")
	}

	// A pod felix knew and that is gone: removed at once.
	d := desired()
	delete(d, netip.MustParsePrefix("10.244.0.5/32"))
	r.setAll(d)
	r.apply()
	if r.has("10.244.0.5/32") {
		t.Fatal("route of a deleted pod kept")
	}

	// Felix learns of the pod within the grace period: the route stays and is adopted.
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("10.244.0.10/32"), Protocol: proto, LinkIndex: cali2.Attrs().Index, Scope: netlink.SCOPE_LINK})
	r.apply()
	d[netip.MustParsePrefix("10.244.0.10/32")] = calc.Route{Dst: netip.MustParsePrefix("10.244.0.10/32"), Kind: calc.KindWorkload, Dev: "cali2"}
	r.setAll(d)
	if res := r.apply(); res.Replaced != 0 {
		t.Fatalf("adopting the CNI's route rewrote it: %+v", res)
	}
	r.now = r.now.Add(time.Minute)
	r.apply()
	if !r.has("10.244.0.10/32") {
		t.Fatal("adopted route removed")
	}
}

func TestFailuresIsolatedAndRetried(t *testing.T) {
	r := newRig(t)
	r.fake.Fail(&nl.Failure{Op: "RouteReplace", Dst: "10.244.0.5/32", Err: unix.EINVAL, Times: -1})
	r.fake.Fail(&nl.Failure{Op: "RouteReplace", Dst: "10.244.0.6/32", Err: unix.ENOBUFS, Times: 2})
	r.setAll(desired())
	res := r.apply()
	if r.has("10.244.0.5/32") || !r.has("10.244.0.6/32") || !r.has("10.244.0.0/26") || !r.has("10.244.1.0/26") {
		t.Fatalf("routes:\n%s", r.fake)
	}
	if len(res.Failed) != 1 || res.Failed[0].Dst.String() != "10.244.0.5/32" || res.NetlinkErrors != 3 {
		t.Fatalf("result %+v", res)
	}
	if !r.rt.NextDeadline().Equal(r.now.Add(time.Second)) {
		t.Fatalf("no retry scheduled: %v", r.rt.NextDeadline())
	}
	// Not retried before the deadline, retried after it.
	before := r.fake.Calls("RouteReplace")
	r.apply()
	if r.fake.Calls("RouteReplace") != before {
		t.Fatal("failed route retried before its retry time")
	}
	r.now = r.now.Add(time.Second)
	r.apply()
	if r.fake.Calls("RouteReplace") != before+1 {
		t.Fatal("failed route not retried")
	}
}

func TestMissingLinkProgrammedWhenItAppears(t *testing.T) {
	r := newRig(t)
	d := desired()
	d[netip.MustParsePrefix("10.244.0.7/32")] = calc.Route{Dst: netip.MustParsePrefix("10.244.0.7/32"), Kind: calc.KindWorkload, Dev: "cali3"}
	r.setAll(d)
	res := r.apply()
	if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Error(), "cali3") {
		t.Fatalf("failed %+v", res.Failed)
	}
	r.fake.AddLink("cali3", 1500)
	r.apply()
	if !r.has("10.244.0.7/32") {
		t.Fatal("route not programmed after its link appeared")
	}
	// The link goes (pod deleted): the kernel silently drops its routes; the cache follows.
	r.fake.DelLink("cali3")
	r.fake.AddLink("cali3", 1500)
	r.apply()
	if !r.has("10.244.0.7/32") {
		t.Fatal("route not re-added on the recreated link")
	}
}

func TestHostRoutes(t *testing.T) {
	r := newRig(t)
	eth0, _ := r.fake.LinkByName("eth0")
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("198.51.100.0/24"), Protocol: unix.RTPROT_KERNEL, LinkIndex: eth0.Attrs().Index, Scope: netlink.SCOPE_LINK})
	r.fake.InjectRoute(netlink.Route{Dst: nil, Protocol: unix.RTPROT_BOOT, LinkIndex: eth0.Attrs().Index, Gw: net.ParseIP("198.51.100.1")})
	r.setAll(desired())
	r.apply()
	hr := r.rt.HostRoutes()
	if len(hr) != 2 || !r.rt.HostRoutesChanged() {
		t.Fatalf("host routes %+v", hr)
	}
	if r.rt.HostRoutesChanged() {
		t.Fatal("HostRoutesChanged did not clear")
	}
}

// After a restart felix learns its routes again; until it is in sync, a tabby route it does not
// want yet is "not learned yet", not "stale": it stays, while wanted routes are still written.
func TestHoldDeletesUntilInSync(t *testing.T) {
	r := newRig(t)
	eth0, _ := r.fake.LinkByName("eth0")
	r.fake.InjectRoute(netlink.Route{Dst: ipnet("10.244.9.0/26"), Protocol: proto, LinkIndex: eth0.Attrs().Index, Gw: net.ParseIP("198.51.100.12")})
	r.rt.SetHoldDeletes(true)
	r.setAll(desired())
	r.apply()
	if !r.has("10.244.9.0/26") {
		t.Fatalf("a remote route was deleted while felix was not in sync:\n%s", r.fake)
	}
	if !r.has("10.244.0.5/32") {
		t.Fatalf("a desired route was not written while holding deletes:\n%s", r.fake)
	}
	r.rt.SetHoldDeletes(false)
	r.apply()
	if r.has("10.244.9.0/26") {
		t.Fatalf("the stale route survived the end of the hold:\n%s", r.fake)
	}
}
