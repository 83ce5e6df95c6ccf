package localroutes

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/routetable"
)

type key struct {
	class routetable.Class
	dst   netip.Prefix
}

// recorder is a route writer that keeps each class's routes and counts the calls.
type recorder struct {
	routes map[key]calc.Route
	calls  int
}

func (r *recorder) SetRoute(c routetable.Class, rt calc.Route) {
	r.routes[key{c, rt.Dst}] = rt
	r.calls++
}

func (r *recorder) RemoveRoute(c routetable.Class, dst netip.Prefix) {
	delete(r.routes, key{c, dst})
	r.calls++
}

func workload(iface string, ips ...string) model.WorkloadUpdate {
	w := model.Workload{Interface: iface}
	for _, ip := range ips {
		w.IPs = append(w.IPs, netip.MustParseAddr(ip))
	}
	return model.WorkloadUpdate{Workload: w}
}

func TestLocalRoutes(t *testing.T) {
	rec := &recorder{routes: map[key]calc.Route{}}
	m := New(rec, "n1", slog.New(slog.DiscardHandler))
	pass := func(what string, wantCalls int, msgs ...any) {
		t.Helper()
		for _, msg := range msgs {
			m.OnUpdate(msg)
		}
		rec.calls = 0
		if err := m.CompleteDeferredWork(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		if rec.calls != wantCalls {
			t.Fatalf("%s: %d route writer calls, want %d", what, rec.calls, wantCalls)
		}
	}
	route := func(c routetable.Class, dst string) string {
		r, ok := rec.routes[key{c, netip.MustParsePrefix(dst)}]
		if !ok {
			return ""
		}
		return r.String()
	}

	var pods []any
	for i := 0; i < 500; i++ {
		pods = append(pods, workload("cali"+netip.AddrFrom4([4]byte{0, 0, byte(i >> 8), byte(i)}).String(), netip.AddrFrom4([4]byte{10, 244, byte(2 + i/200), byte(1 + i%200)}).String()))
	}
	pass("full sync", 500, pods...)
	pass("a new dual-stack pod", 2, workload("calia", "10.244.0.5", "fd00:10:244::5"))
	if route(routetable.ClassWorkload, "fd00:10:244::5/128") != "fd00:10:244::5/128 dev calia scope link" {
		t.Fatalf("IPv6 route %q", route(routetable.ClassWorkload, "fd00:10:244::5/128"))
	}
	pass("the same pod again", 0, workload("calia", "10.244.0.5", "fd00:10:244::5"))
	pass("the pod loses an address", 1, workload("calia", "10.244.0.5"))

	// Two veths claim one address: the first by name is routed, whatever came first; when it
	// goes, the other takes over.
	pass("a second claim", 0, workload("calib", "10.244.0.5"))
	pass("a first claim by name", 1, workload("cali0", "10.244.0.5"))
	if got := route(routetable.ClassWorkload, "10.244.0.5/32"); got != "10.244.0.5/32 dev cali0 scope link" {
		t.Fatalf("claimed address %q", got)
	}
	pass("the first one goes", 1, model.WorkloadRemove{Interface: "cali0"})
	if got := route(routetable.ClassWorkload, "10.244.0.5/32"); got != "10.244.0.5/32 dev calia scope link" {
		t.Fatalf("claimed address %q", got)
	}
	pass("an unknown veth goes", 0, model.WorkloadRemove{Interface: "cali-none"})
	pass("invalid workloads", 1, workload("", "10.244.0.9"), workload("calic", "::ffff:10.244.0.8", "10.244.0.8"))

	// Blocks: this node's are blackholed; a block moving to another node stops being.
	pass("blocks", 1,
		model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix("10.244.0.0/26"), Node: "n1"}},
		model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix("10.244.1.0/26"), Node: "n2"}})
	if route(routetable.ClassBlackhole, "10.244.0.0/26") != "blackhole 10.244.0.0/26" {
		t.Fatal("no blackhole for the local block")
	}
	pass("the same block, borrowed from", 0, model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix("10.244.0.0/26"), Node: "n1", Borrowed: []model.Borrowed{{Addr: netip.MustParseAddr("10.244.0.60"), Node: "n2"}}}})
	pass("the block moves", 1, model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix("10.244.0.0/26"), Node: "n2"}})
	pass("a released block of another node", 0, model.BlockRemove{CIDR: netip.MustParsePrefix("10.244.1.0/26")})
	if len(rec.routes) != 500+2 {
		t.Fatalf("%d routes, want the 500 pods', calia's and calic's", len(rec.routes))
	}
}
