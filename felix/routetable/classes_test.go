package routetable

import (
	"maps"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
)

// Where several classes want one prefix, the lowest is programmed; when it goes, the next one
// waiting takes over with one replace, and the prefix is deleted only when no class wants it.
func TestClassesArbitrate(t *testing.T) {
	r := newRig(t)
	p := netip.MustParsePrefix("10.244.0.60/32")
	viaNode := calc.Route{Dst: p, Kind: calc.KindRemote, Dev: "eth0", Gw: netip.MustParseAddr("198.51.100.12")}
	pod := workloadRoute(p.String(), "cali1")
	const static Class = 25 // a manager of another kind, between the blackholes and BGP
	viaStatic := calc.Route{Dst: p, Kind: calc.KindRemote, Dev: "eth0", Gw: netip.MustParseAddr("198.51.100.1")}

	r.rt.SetRoute(ClassLearned, viaNode)
	r.apply()
	if got, _ := r.fake.Route(p.String()); !got.Gw.Equal(viaNode.Gw.AsSlice()) {
		t.Fatalf("learned route %v", got)
	}

	rep, del := r.ops()
	r.rt.SetRoute(static, viaStatic)
	r.rt.SetRoute(ClassWorkload, pod)
	res := r.apply()
	r.wantOps("a pod takes the prefix", rep, del, 1, 0)
	if got, _ := r.fake.Route(p.String()); got.Gw != nil || got.LinkIndex != r.link("cali1") || res.Programmed[calc.KindWorkload] != 1 || res.Programmed[calc.KindRemote] != 0 {
		t.Fatalf("with a pod: %v, programmed %v", got, res.Programmed)
	}

	// A class behind the pod changes its route: nothing is written.
	rep, del = r.ops()
	r.rt.SetRoute(ClassLearned, calc.Route{Dst: p, Kind: calc.KindRemote, Dev: "eth0", Gw: netip.MustParseAddr("198.51.100.13")})
	r.apply()
	r.wantOps("a waiting route changed", rep, del, 0, 0)

	rep, del = r.ops()
	r.rt.RemoveRoute(ClassWorkload, p)
	r.apply()
	r.wantOps("the pod goes: the next class takes over", rep, del, 1, 0)
	if got, _ := r.fake.Route(p.String()); !got.Gw.Equal(viaStatic.Gw.AsSlice()) {
		t.Fatalf("after the pod: %v, want via %s", got, viaStatic.Gw)
	}
	rep, del = r.ops()
	r.rt.RemoveRoute(static, p)
	r.apply()
	r.wantOps("then the last", rep, del, 1, 0)
	if got, _ := r.fake.Route(p.String()); got.Gw.String() != "198.51.100.13" {
		t.Fatalf("after the static route: %v, want the learned one's latest", got)
	}

	// A blackhole for the same prefix wins over BGP; removing BGP's behind it writes nothing.
	r.rt.SetRoute(ClassBlackhole, calc.BlackholeRoute(p))
	r.apply()
	if got, _ := r.fake.Route(p.String()); got.Type != unix.RTN_BLACKHOLE {
		t.Fatalf("with a blackhole: %v", got)
	}
	rep, del = r.ops()
	r.rt.RemoveRoute(ClassLearned, p)
	r.rt.RemoveRoute(ClassWorkload, p) // not there: nothing
	r.apply()
	r.wantOps("a waiting route removed", rep, del, 0, 0)
	if len(r.rt.waiting) != 0 {
		t.Fatalf("waiting %v, want none", r.rt.waiting)
	}
	r.rt.RemoveRoute(ClassBlackhole, p)
	r.apply()
	if r.has(p.String()) || len(r.rt.DesiredRoutes()) != 0 {
		t.Fatalf("no class wants the prefix: kernel %v desired %v", r.fake, r.rt.DesiredRoutes())
	}
	if !maps.Equal(r.rt.kinds, map[calc.Kind]int{calc.KindWorkload: 0, calc.KindBlackhole: 0, calc.KindRemote: 0}) {
		t.Fatalf("kinds %v, want all zero", r.rt.kinds)
	}
}
