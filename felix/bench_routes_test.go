package felix

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The benchmarks below hold 12,000 routes: 10,000 pods and 2,000 remote blocks learned from BGP.

const benchPods, benchRemotes = 10000, 2000

func benchPodIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}) }

func benchRemote(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(250 + i>>10), byte(i >> 2), byte(i&3) << 6}), 26)
}

func benchVeth(i int) string { return fmt.Sprintf("cali%011d", i) }

func extraIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 246, byte(i >> 8), byte(i)}) }

// benchFelix is felix with the 12,000 routes applied, each pod on a veth of its own (plus two
// spare veths, benchVeth(benchPods) and the next).
func benchFelix(b *testing.B) *Felix {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	for i := 0; i < benchPods+2; i++ {
		fk.AddLink(benchVeth(i), 1500)
	}
	f, err := New(Config{NodeName: "n1", UplinkInterface: ipfamily.PairOf("eth0", ""), ResyncInterval: time.Hour}, WithNetlink(fk), WithCommandRunner(fakekernel.New()), WithSysctl(&fakeSysctl{set: map[string]string{}}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	f.send(thisNode("198.51.100.11/24", ""), pool("pods", "10.244.0.0/16", v1.IPIPModeNever, false), pool("remote", "10.250.0.0/15", v1.IPIPModeNever, false))
	for i := 0; i < benchPods; i++ {
		f.send(model.WorkloadUpdate{Workload: model.Workload{Interface: benchVeth(i), IPs: []netip.Addr{benchPodIP(i)}}})
	}
	for i := 0; i < benchRemotes; i++ {
		f.send(model.RouteUpdate{Prefix: benchRemote(i), NextHop: netip.MustParseAddr("198.51.100.12")})
	}
	if err := f.ApplyNow(context.Background()); err != nil {
		b.Fatal(err)
	}
	return f
}

// One pod added (and the previous iteration's removed) with 12,000 routes in place.
func BenchmarkWorkloadAdded12k(b *testing.B) {
	f := benchFelix(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 {
			f.OnUpdate(model.WorkloadRemove{Interface: benchVeth(benchPods + (i-1)%2)})
		}
		f.OnUpdate(model.WorkloadUpdate{Workload: model.Workload{Interface: benchVeth(benchPods + i%2), IPs: []netip.Addr{extraIP(i)}}})
		if err := f.ApplyNow(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// One BGP route learned (and the previous iteration's withdrawn) with 12,000 routes in place.
func BenchmarkBGPRouteLearned12k(b *testing.B) {
	f := benchFelix(b)
	ctx := context.Background()
	nh := netip.MustParseAddr("198.51.100.13")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 {
			f.OnUpdate(model.RouteRemove{Prefix: benchRemote(benchRemotes + (i-1)%4000)})
		}
		f.OnUpdate(model.RouteUpdate{Prefix: benchRemote(benchRemotes + i%4000), NextHop: nh})
		if err := f.ApplyNow(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// A burst of 1,000 BGP routes learned in one apply, with 12,000 routes in place.
func BenchmarkBGPBurst1000(b *testing.B) {
	f := benchFelix(b)
	ctx := context.Background()
	nh := netip.MustParseAddr("198.51.100.13")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 1000; j++ {
			f.OnUpdate(model.RouteUpdate{Prefix: benchRemote(benchRemotes + j), NextHop: nh})
		}
		if err := f.ApplyNow(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for j := 0; j < 1000; j++ {
			f.OnUpdate(model.RouteRemove{Prefix: benchRemote(benchRemotes + j)})
		}
		if err := f.ApplyNow(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
