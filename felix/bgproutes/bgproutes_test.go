package bgproutes

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// recorder is a route writer that keeps the routes and counts the calls.
type recorder struct {
	routes       map[netip.Prefix]calc.Route
	sets, remove int
}

func (r *recorder) SetRoute(c routetable.Class, rt calc.Route) {
	if c != routetable.ClassLearned {
		panic(fmt.Sprint("class ", c))
	}
	r.routes[rt.Dst] = rt
	r.sets++
}

func (r *recorder) RemoveRoute(c routetable.Class, dst netip.Prefix) {
	delete(r.routes, dst)
	r.remove++
}

func (r *recorder) calls() int {
	n := r.sets + r.remove
	r.sets, r.remove = 0, 0
	return n
}

func block(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i >> 2), byte(i&3) << 6}), 26)
}

func node(name, addr string) model.NodeUpdate {
	n := model.Node{Name: name}
	n.BGPAddress.Set(ipfamily.IPv4, netip.MustParsePrefix(addr))
	return model.NodeUpdate{Node: n}
}

// A route learned, replaced or withdrawn is its own prefix's work; what every route depends on
// decides them all again; what changes nothing of them costs nothing.
func TestWorkPerChange(t *testing.T) {
	rec := &recorder{routes: map[netip.Prefix]calc.Route{}}
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "unresolved"})
	m := New(rec, Options{NodeName: "n1", Uplink: ipfamily.PairOf("eth0", "eth0"), Unresolved: gauge})
	ctx := context.Background()
	pass := func(what string, msgs []any, wantCalls int) {
		t.Helper()
		for _, msg := range msgs {
			m.OnUpdate(msg)
		}
		if err := m.CompleteDeferredWork(ctx, false); err != nil {
			t.Fatal(err)
		}
		if n := rec.calls(); n != wantCalls {
			t.Fatalf("%s: %d route writer calls, want %d", what, n, wantCalls)
		}
	}
	nh := netip.MustParseAddr("198.51.100.12")
	msgs := []any{node("n1", "198.51.100.11/24"), model.PoolUpdate{Pool: model.Pool{Name: "p", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever}}}
	for i := 0; i < 1000; i++ {
		msgs = append(msgs, model.RouteUpdate{Prefix: block(i), NextHop: nh})
	}
	pass("full sync", msgs, 1000)
	if r := rec.routes[block(7)]; r.String() != "10.244.1.192/26 via 198.51.100.12 dev eth0" {
		t.Fatalf("route %v", r)
	}

	pass("one learned", []any{model.RouteUpdate{Prefix: block(1000), NextHop: nh}}, 1)
	pass("the same again", []any{model.RouteUpdate{Prefix: block(1000), NextHop: nh}}, 0)
	pass("one replaced", []any{model.RouteUpdate{Prefix: block(1000), NextHop: netip.MustParseAddr("198.51.100.13")}}, 1)
	pass("one withdrawn", []any{model.RouteRemove{Prefix: block(1000)}}, 1)
	pass("one withdrawn again", []any{model.RouteRemove{Prefix: block(1000)}}, 0)
	pass("another node", []any{node("n2", "198.51.100.12/24")}, 0)
	pass("a pool's natOutgoing", []any{model.PoolUpdate{Pool: model.Pool{Name: "p", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever, NATOutgoing: true}}}, 0)

	pass("a pool's ipipMode", []any{model.PoolUpdate{Pool: model.Pool{Name: "p", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeAlways}}}, 1000)
	if r := rec.routes[block(7)]; r.Dev != calc.TunnelDevice {
		t.Fatalf("route %v, want through tunl0", r)
	}
	pass("this node's subnet", []any{node("n1", "198.51.100.11/25")}, 1000)
	pass("the host's routes", []any{routetable.HostRoutesUpdate{}}, 1000)
	pass("a withdrawal with the pools", []any{model.RouteRemove{Prefix: block(0)}, model.PoolRemove{Name: "p"}}, 1000)
	if len(rec.routes) != 0 {
		t.Fatalf("routes left without a pool: %d", len(rec.routes))
	}

	// Unresolved next hops are reported, counted and forgotten.
	pass("back", []any{model.PoolUpdate{Pool: model.Pool{Name: "p", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever}}}, 999)
	pass("an unusable next hop", []any{model.RouteUpdate{Prefix: block(1), NextHop: netip.MustParseAddr("203.0.113.7")}}, 1)
	if u := m.Unresolved(); len(u) != 1 || u[block(1)] != "next hop 203.0.113.7: no host route to next hop 203.0.113.7" || value(gauge) != 1 {
		t.Fatalf("unresolved %v (gauge %v)", u, value(gauge))
	}
	pass("a host route to it", []any{routetable.HostRoutesUpdate{Routes: []calc.HostRoute{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: netip.MustParseAddr("198.51.100.1"), Dev: "eth0"}}}}, 999)
	if u := m.Unresolved(); len(u) != 0 || value(gauge) != 0 {
		t.Fatalf("unresolved %v (gauge %v)", u, value(gauge))
	}
	if r := rec.routes[block(1)]; r.String() != "10.244.0.64/26 via 198.51.100.1 dev eth0" {
		t.Fatalf("route %v, want via the default gateway", r)
	}
}

func value(g prometheus.Gauge) float64 {
	var m dto.Metric
	_ = g.Write(&m)
	return m.Gauge.GetValue()
}
