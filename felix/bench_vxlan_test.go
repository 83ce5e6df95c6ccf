package felix

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/model/modeltest"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The VXLAN benchmarks hold 1,000 other nodes, each a VTEP (a neighbour and an FDB entry on
// vxlan-v6.tabby) with 12 blocks behind it: 12,000 routes, netlink and iptables faked. IPv6,
// whose address space holds that many nodes' underlay addresses. Their reference is the same
// change in a native pool (the blocks' routes learned from BGP), measured in the same run; the
// full sync on the kernel against `ip -batch` is hack/bench/felix's.

const benchVTEPs, benchBlocksPerVTEP = 1000, modeltest.VXLANBlocksPerNode

var benchBlock = modeltest.VXLANBlock6

func benchVXLANNode(i int) model.Node { return modeltest.VXLANNode6(i, "") }

// benchVXLANLocal is this node: its underlay on up0 and its VTEP outside the others' blocks.
func benchVXLANLocal() model.Node { return modeltest.VXLANNode6(-1, "n1") }

// benchVXLANMessages is what felix hears about the 1,000 nodes with the pool in mode: in VXLAN
// the blocks alone make the routes, natively BGP brings each block's route via its node.
func benchVXLANMessages(mode v1.VXLANMode) []any {
	msgs := []any{
		model.NodeUpdate{Node: benchVXLANLocal()},
		model.PoolUpdate{Pool: model.Pool{Name: "vx6", CIDR: netip.MustParsePrefix("fd00:10:244::/48"), IPIPMode: v1.IPIPModeNever, VXLANMode: mode}},
	}
	for i := 0; i < benchVTEPs; i++ {
		msgs = append(msgs, benchJoin(i, mode)...)
	}
	return append(msgs, model.InSync{})
}

// benchJoin is node i joining with its 12 blocks; benchLeave is it leaving.
func benchJoin(i int, mode v1.VXLANMode) []any {
	n := benchVXLANNode(i)
	msgs := []any{model.NodeUpdate{Node: n}}
	for j := 0; j < benchBlocksPerVTEP; j++ {
		cidr := benchBlock(i*benchBlocksPerVTEP + j)
		msgs = append(msgs, model.BlockUpdate{Block: model.Block{CIDR: cidr, Node: n.Name}})
		if mode == v1.VXLANModeNever {
			msgs = append(msgs, model.RouteUpdate{Prefix: cidr, NextHop: n.BGPAddress.Get(ipfamily.IPv6).Addr()})
		}
	}
	return msgs
}

func benchLeave(i int, mode v1.VXLANMode) []any {
	var msgs []any
	for j := 0; j < benchBlocksPerVTEP; j++ {
		cidr := benchBlock(i*benchBlocksPerVTEP + j)
		if mode == v1.VXLANModeNever {
			msgs = append(msgs, model.RouteRemove{Prefix: cidr})
		}
		msgs = append(msgs, model.BlockRemove{CIDR: cidr})
	}
	return append(msgs, model.NodeRemove{Name: benchVXLANNode(i).Name})
}

// benchFakeFelix is felix on the fake handle with the 1,000 nodes in place, the pool in mode.
func benchFakeFelix(b *testing.B, mode v1.VXLANMode) *Felix {
	fk := nl.NewFake()
	fk.AddLink("up0", 1500)
	f, err := New(Config{NodeName: "n1", UplinkInterface: ipfamily.PairOf("up0", "up0"), ResyncInterval: time.Hour},
		WithNetlink(fk), WithCommandRunner(fakekernel.New()), WithSysctl(&fakeSysctl{set: map[string]string{}}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	f.send(benchVXLANMessages(mode)...)
	if err := f.ApplyNow(context.Background()); err != nil {
		b.Fatal(err)
	}
	if got := len(f.rt.DesiredRoutes()); got != benchVTEPs*benchBlocksPerVTEP {
		b.Fatalf("%d routes wanted", got)
	}
	return f
}

// benchPerChange times one change and the pass after in VXLAN and, as the reference, the same
// change in a native pool, iteration by iteration: ns/op is both together; vxlan-µs/op,
// native-µs/op and vxlan/native say each and their ratio.
func benchPerChange(b *testing.B, change func(i int, mode v1.VXLANMode) []any) {
	vx, native := benchFakeFelix(b, v1.VXLANModeAlways), benchFakeFelix(b, v1.VXLANModeNever)
	ctx := context.Background()
	var vxTime, nativeTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, run := range []struct {
			f    *Felix
			mode v1.VXLANMode
			sum  *time.Duration
		}{{vx, v1.VXLANModeAlways, &vxTime}, {native, v1.VXLANModeNever, &nativeTime}} {
			start := time.Now()
			run.f.send(change(i, run.mode)...)
			if err := run.f.ApplyNow(ctx); err != nil {
				b.Fatal(err)
			}
			*run.sum += time.Since(start)
		}
	}
	b.ReportMetric(float64(vxTime.Microseconds())/float64(b.N), "vxlan-µs/op")
	b.ReportMetric(float64(nativeTime.Microseconds())/float64(b.N), "native-µs/op")
	b.ReportMetric(float64(vxTime)/float64(nativeTime), "vxlan/native")
}

// A node joins with its 12 blocks (and the previous iteration's leaves): in VXLAN a neighbour,
// an FDB entry and 12 routes via its VTEP, natively 12 routes learned from BGP.
func BenchmarkVXLANNodeJoined(b *testing.B) {
	spare := func(i int) int { return benchVTEPs + i%2 }
	benchPerChange(b, func(i int, mode v1.VXLANMode) []any {
		var msgs []any
		if i > 0 {
			msgs = benchLeave(spare(i-1), mode)
		}
		return append(msgs, benchJoin(spare(i), mode)...)
	})
}

// One block claimed by a node already there (and the previous iteration's released): in VXLAN
// its route via the node's VTEP, natively its route learned from BGP.
func BenchmarkVXLANBlockAdded(b *testing.B) {
	owner := benchVXLANNode(7)
	extra := func(i int) netip.Prefix { return benchBlock((benchVTEPs+2)*benchBlocksPerVTEP + i%1000) }
	benchPerChange(b, func(i int, mode v1.VXLANMode) []any {
		var msgs []any
		if i > 0 {
			if mode == v1.VXLANModeNever {
				msgs = append(msgs, model.RouteRemove{Prefix: extra(i - 1)})
			}
			msgs = append(msgs, model.BlockRemove{CIDR: extra(i - 1)})
		}
		msgs = append(msgs, model.BlockUpdate{Block: model.Block{CIDR: extra(i), Node: owner.Name}})
		if mode == v1.VXLANModeNever {
			msgs = append(msgs, model.RouteUpdate{Prefix: extra(i), NextHop: owner.BGPAddress.Get(ipfamily.IPv6).Addr()})
		}
		return msgs
	})
}
