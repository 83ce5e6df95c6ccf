package routetable

import (
	"fmt"
	"maps"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/nl"
)

func workloadRoute(dst, dev string) calc.Route {
	return calc.Route{Dst: netip.MustParsePrefix(dst), Kind: calc.KindWorkload, Dev: dev}
}

// manyRoutes is desired() plus n workload /32s, a node's worth of pods.
func manyRoutes(n int) map[netip.Prefix]calc.Route {
	m := desired()
	for i := 0; i < n; i++ {
		r := workloadRoute(fmt.Sprintf("10.244.%d.%d/32", 2+i/250, 1+i%250), fmt.Sprintf("cali%d", 1+i%2))
		m[r.Dst] = r
	}
	return m
}

// ops counts route writes to the fake kernel.
func (r *rig) ops() (replaced, deleted int) {
	return r.fake.Calls("RouteReplace"), r.fake.Calls("RouteDel")
}

func (r *rig) wantOps(what string, replaced0, deleted0, replaced, deleted int) {
	r.t.Helper()
	rep, del := r.ops()
	if rep-replaced0 != replaced || del-deleted0 != deleted {
		r.t.Fatalf("%s: %d replaces and %d deletes, want %d and %d", what, rep-replaced0, del-deleted0, replaced, deleted)
	}
}

func TestSetRouteAndRemoveRouteWriteOnlyThatRoute(t *testing.T) {
	r := newRig(t)
	r.setAll(manyRoutes(500))
	if res := r.apply(); res.Replaced != 504 || len(res.Failed) != 0 {
		t.Fatalf("full sync: %+v", res)
	}

	rep, del := r.ops()
	r.set(workloadRoute("10.244.0.9/32", "cali2"))
	if res := r.apply(); res.Replaced != 1 || res.Deleted != 0 || !r.has("10.244.0.9/32") {
		t.Fatalf("new pod: %+v\n%s", res, r.fake)
	}
	r.wantOps("new pod", rep, del, 1, 0)

	rep, del = r.ops()
	r.set(workloadRoute("10.244.0.9/32", "cali2"))
	r.apply()
	r.wantOps("same route again", rep, del, 0, 0)

	rep, del = r.ops()
	r.set(workloadRoute("10.244.0.9/32", "cali1"))
	r.apply()
	r.wantOps("pod moved to another veth", rep, del, 1, 0)
	if rt, _ := r.fake.Route("10.244.0.9/32"); rt.LinkIndex != r.link("cali1") {
		t.Fatalf("moved route on link %d, want cali1", rt.LinkIndex)
	}

	// A deleted pod's route goes at once: felix wanted it, so no grace period applies.
	rep, del = r.ops()
	r.remove(netip.MustParsePrefix("10.244.0.9/32"))
	if res := r.apply(); res.Deleted != 1 || r.has("10.244.0.9/32") {
		t.Fatalf("deleted pod: %+v", res)
	}
	r.wantOps("deleted pod", rep, del, 0, 1)

	rep, del = r.ops()
	r.remove(netip.MustParsePrefix("10.244.0.9/32"))
	r.remove(netip.MustParsePrefix("10.244.99.9/32"))
	r.apply()
	r.wantOps("removing what is not wanted", rep, del, 0, 0)

	// Removed then wanted again before an Apply: not released, nothing written.
	rep, del = r.ops()
	r.remove(netip.MustParsePrefix("10.244.2.1/32"))
	r.set(workloadRoute("10.244.2.1/32", "cali1"))
	r.apply()
	r.wantOps("remove and re-add", rep, del, 0, 0)
	if _, rel := r.rt.released[netip.MustParsePrefix("10.244.2.1/32")]; rel || !r.has("10.244.2.1/32") {
		t.Fatal("re-added route still released or gone")
	}

	// Stating every route again after changes one by one writes nothing.
	rep, del = r.ops()
	r.setAll(manyRoutes(500))
	r.apply()
	r.wantOps("same full set", rep, del, 0, 0)
}

func (r *rig) link(name string) int {
	l, err := r.fake.LinkByName(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return l.Attrs().Index
}

// programmedByWalk is what Programmed was before counts were kept: desired routes not failed.
func (r *rig) programmedByWalk() map[calc.Kind]int {
	out := map[calc.Kind]int{}
	for dst, w := range r.rt.desired {
		if _, bad := r.rt.failed[dst]; !bad {
			out[w.route.Kind]++
		}
	}
	return out
}

func TestProgrammedCountsAcrossSetters(t *testing.T) {
	r := newRig(t)
	check := func(what string, res Result, want map[calc.Kind]int) {
		t.Helper()
		if walk := r.programmedByWalk(); !maps.Equal(res.Programmed, walk) || (want != nil && !maps.Equal(res.Programmed, want)) {
			t.Fatalf("%s: programmed %v, by walking desired %v, want %v", what, res.Programmed, walk, want)
		}
	}
	r.fake.Fail(&nl.Failure{Op: "RouteReplace", Dst: "10.244.0.5/32", Err: unix.EINVAL, Times: -1})
	r.setAll(manyRoutes(10))
	check("full set with one failure", r.apply(), map[calc.Kind]int{calc.KindWorkload: 11, calc.KindBlackhole: 1, calc.KindRemote: 1})

	r.set(workloadRoute("10.244.0.9/32", "cali2"))
	check("one added", r.apply(), map[calc.Kind]int{calc.KindWorkload: 12, calc.KindBlackhole: 1, calc.KindRemote: 1})

	// A route on a veth that does not exist yet fails without a netlink call.
	r.set(workloadRoute("10.244.0.10/32", "cali9"))
	res := r.apply()
	check("one on a missing veth", res, map[calc.Kind]int{calc.KindWorkload: 12, calc.KindBlackhole: 1, calc.KindRemote: 1})
	if len(res.Failed) != 2 {
		t.Fatalf("failed %v", res.Failed)
	}

	// The failing route is no longer wanted: it neither counts nor fails any more.
	r.remove(netip.MustParsePrefix("10.244.0.5/32"))
	res = r.apply()
	check("failed one removed", res, map[calc.Kind]int{calc.KindWorkload: 12, calc.KindBlackhole: 1, calc.KindRemote: 1})
	if len(res.Failed) != 1 {
		t.Fatalf("failed %v", res.Failed)
	}

	// A prefix changes kind (a workload /32 becomes a remote route).
	r.remove(netip.MustParsePrefix("10.244.0.9/32"))
	r.set(calc.Route{Dst: netip.MustParsePrefix("10.244.0.9/32"), Kind: calc.KindRemote, Dev: "eth0", Gw: netip.MustParseAddr("198.51.100.12")})
	r.remove(netip.MustParsePrefix("10.244.0.0/26"))
	check("kind changed, blackhole removed", r.apply(), map[calc.Kind]int{calc.KindWorkload: 11, calc.KindRemote: 2})

	r.fake.AddLink("cali9", 1500)
	check("missing veth appeared", r.apply(), map[calc.Kind]int{calc.KindWorkload: 12, calc.KindRemote: 2})

	r.setAll(desired())
	check("full set again", r.apply(), map[calc.Kind]int{calc.KindWorkload: 1, calc.KindBlackhole: 1, calc.KindRemote: 1})
}

// While felix is not in sync, a removed route stays in the kernel; it goes when the hold ends.
func TestRemoveRouteHonoursHoldDeletes(t *testing.T) {
	r := newRig(t)
	r.setAll(desired())
	r.apply()
	r.rt.SetHoldDeletes(true)
	rep, del := r.ops()
	r.remove(netip.MustParsePrefix("10.244.0.5/32"))
	r.remove(netip.MustParsePrefix("10.244.1.0/26"))
	r.set(workloadRoute("10.244.0.9/32", "cali2"))
	r.apply()
	r.wantOps("while holding", rep, del, 1, 0)
	if !r.has("10.244.0.5/32") || !r.has("10.244.1.0/26") || !r.has("10.244.0.9/32") {
		t.Fatalf("while holding deletes:\n%s", r.fake)
	}
	r.rt.SetHoldDeletes(false)
	r.apply()
	if r.has("10.244.0.5/32") || r.has("10.244.1.0/26") || !r.has("10.244.0.9/32") {
		t.Fatalf("after the hold:\n%s", r.fake)
	}
}

// The per-device index follows SetRoute and RemoveRoute: when a pod's veth appears, exactly the
// routes still wanted on it are programmed.
func TestLinkEventUsesDeviceIndex(t *testing.T) {
	r := newRig(t)
	r.setAll(manyRoutes(100))
	r.apply()
	a, b, moved := netip.MustParsePrefix("10.244.9.1/32"), netip.MustParsePrefix("10.244.9.2/32"), netip.MustParsePrefix("10.244.9.3/32")
	r.set(workloadRoute(a.String(), "cali9"))
	r.set(workloadRoute(b.String(), "cali9"))
	r.set(workloadRoute(moved.String(), "cali9"))
	if res := r.apply(); len(res.Failed) != 3 {
		t.Fatalf("routes on a missing veth: %+v, want 3 failed", res.Failed)
	}
	r.remove(b)
	r.set(workloadRoute(moved.String(), "cali1"))
	r.apply()
	rep, del := r.ops()
	r.fake.AddLink("cali9", 1500)
	r.drain()
	r.apply()
	if !r.has(a.String()) || r.has(b.String()) {
		t.Fatalf("after cali9 appeared: %s has=%v, %s has=%v", a, r.has(a.String()), b, r.has(b.String()))
	}
	r.wantOps("cali9 appears", rep, del, 1, 0)
	if got := len(r.rt.byDev["cali9"]); got != 1 {
		t.Fatalf("index of cali9 holds %d routes, want 1", got)
	}
}
