package felix

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/nl"
)

// counters are the fake kernel's and NAT's call counts, to see what one apply touched.
type counters struct{ replace, del, linkByName, linkList, nat int }

func count(fk *nl.Fake, fn *fakeNAT) counters {
	return counters{fk.Calls("RouteReplace"), fk.Calls("RouteDel"), fk.Calls("LinkByName"), fk.Calls("LinkList"), fn.applies()}
}

func (c counters) minus(o counters) counters {
	return counters{c.replace - o.replace, c.del - o.del, c.linkByName - o.linkByName, c.linkList - o.linkList, c.nat - o.nat}
}

func podWorkloads(n int) []Workload {
	ws := make([]Workload, n)
	for i := range ws {
		ws[i] = Workload{IP: netip.AddrFrom4([4]byte{10, 244, byte(2 + i/200), byte(1 + i%200)}), Interface: "cali0123456789a"}
	}
	return ws
}

func fullSyncedFelix(t *testing.T, cfg func(*Config), pods int) (*Felix, *nl.Fake, *fakeNAT) {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	fk.AddLink("cali0123456789a", 1500)
	fk.AddLink("calibbbbbbbbbbb", 1500)
	fn, fs := &fakeNAT{}, &fakeSysctl{set: map[string]string{}}
	c := Config{NodeName: "n1", UplinkInterface: "eth0", ResyncInterval: time.Hour}
	if cfg != nil {
		cfg(&c)
	}
	f, err := New(c, WithNetlink(fk), WithNAT(fn), WithSysctl(fs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	f.SetLocalNode(netip.MustParsePrefix("198.51.100.11/24"), netip.Addr{})
	f.SetPools([]Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever, NATOutgoing: true}})
	f.SetLocalBlocks([]netip.Prefix{netip.MustParsePrefix("10.244.1.0/26")})
	f.UpsertBGPRoute(BGPRoute{Prefix: netip.MustParsePrefix("10.244.9.0/26"), NextHop: netip.MustParseAddr("198.51.100.12")})
	// Another node's pod borrowed an address out of our block.
	f.UpsertBGPRoute(BGPRoute{Prefix: netip.MustParsePrefix("10.244.1.60/32"), NextHop: netip.MustParseAddr("198.51.100.12")})
	f.SetWorkloads(podWorkloads(pods))
	if err := f.ApplyNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(fk.Routes()); n != pods+3 {
		t.Fatalf("full sync made %d routes, want %d", n, pods+3)
	}
	return f, fk, fn
}

func (f *Felix) mustApply(t *testing.T) {
	t.Helper()
	if err := f.ApplyNow(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A pod coming or going writes its route and nothing else: no other route, no tunl0 lookups,
// no NAT, however many pods the node has.
func TestWorkloadChangeWritesOnlyItsRoute(t *testing.T) {
	const pods = 500
	f, fk, fn := fullSyncedFelix(t, nil, pods)
	ws := podWorkloads(pods)
	want := func(what string, before counters, replace, del int) {
		t.Helper()
		got := count(fk, fn).minus(before)
		if got != (counters{replace: replace, del: del}) {
			t.Fatalf("%s: calls %+v, want %d replace and %d delete only", what, got, replace, del)
		}
	}

	before := count(fk, fn)
	ws = append(ws, Workload{IP: netip.MustParseAddr("10.244.1.10"), Interface: "calibbbbbbbbbbb"})
	f.SetWorkloads(ws)
	f.mustApply(t)
	want("new pod", before, 1, 0)
	if r, ok := fk.Route("10.244.1.10/32"); !ok || r.Protocol != v1.RouteProtocol {
		t.Fatalf("new pod's route %+v %v", r, ok)
	}

	before = count(fk, fn)
	ws[pods].Interface = "cali0123456789a"
	f.SetWorkloads(ws)
	f.mustApply(t)
	want("pod on another veth", before, 1, 0)

	before = count(fk, fn)
	ws = ws[:pods]
	f.SetWorkloads(ws)
	f.mustApply(t)
	want("pod deleted", before, 0, 1)
	if _, ok := fk.Route("10.244.1.10/32"); ok {
		t.Fatal("deleted pod's route kept")
	}

	before = count(fk, fn)
	f.SetWorkloads(slices.Clone(ws))
	f.mustApply(t)
	want("same pods", before, 0, 0)

	// A pod on the borrowed address: its route wins over the BGP one, and the BGP route
	// comes back when the pod goes (a full recompute decides, as Compute is the reference).
	borrowed := netip.MustParsePrefix("10.244.1.60/32")
	f.SetWorkloads(append(slices.Clone(ws), Workload{IP: borrowed.Addr(), Interface: "calibbbbbbbbbbb"}))
	f.mustApply(t)
	if r, _ := fk.Route(borrowed.String()); r.Gw != nil {
		t.Fatalf("pod on a borrowed address routed via %v", r.Gw)
	}
	f.SetWorkloads(ws)
	f.mustApply(t)
	if r, _ := fk.Route(borrowed.String()); r.Gw.String() != "198.51.100.12" {
		t.Fatalf("borrowed /32 not routed back to its node: %+v", r)
	}
	if n := len(fk.Routes()); n != pods+3 {
		t.Fatalf("%d routes, want %d", n, pods+3)
	}

	// Anything else still re-applies NAT.
	before = count(fk, fn)
	f.SetPools([]Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever}})
	f.mustApply(t)
	if got := count(fk, fn).minus(before); got.nat != 1 || got.replace+got.del != 0 {
		t.Fatalf("pool change: %+v, want one NAT apply and no route writes", got)
	}
}

// With WaitForInSync, a pod deleted before felix is in sync keeps its route (deletes are held,
// as on the full path); SetInSync removes it.
func TestWorkloadRemovalHeldUntilInSync(t *testing.T) {
	f, fk, fn := fullSyncedFelix(t, func(c *Config) { c.WaitForInSync = true }, 20)
	natBefore := fn.applies()
	ws := podWorkloads(20)
	f.SetWorkloads(ws[1:])
	f.mustApply(t)
	gone := netip.PrefixFrom(ws[0].IP, 32).String()
	if _, ok := fk.Route(gone); !ok {
		t.Fatal("route removed before in sync")
	}
	f.SetInSync()
	f.mustApply(t)
	if _, ok := fk.Route(gone); ok {
		t.Fatal("route of the deleted pod kept after in sync")
	}
	if fn.applies() == natBefore {
		t.Fatal("NAT not applied once in sync")
	}
}

func BenchmarkNewWorkload(b *testing.B) {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	fk.AddLink("cali0123456789a", 1500)
	f, err := New(Config{UplinkInterface: "eth0", ResyncInterval: time.Hour}, WithNetlink(fk), WithNAT(&fakeNAT{}), WithSysctl(&fakeSysctl{set: map[string]string{}}))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	f.SetPools([]Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16")}})
	ws := podWorkloads(10000)
	f.SetWorkloads(ws)
	if err := f.ApplyNow(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		extra := Workload{IP: netip.AddrFrom4([4]byte{10, 244, 250, byte(i)}), Interface: "cali0123456789a"}
		f.SetWorkloads(append(ws[:10000:10000], extra))
		if err := f.ApplyNow(context.Background()); err != nil {
			b.Fatal(fmt.Errorf("apply %d: %w", i, err))
		}
	}
}
