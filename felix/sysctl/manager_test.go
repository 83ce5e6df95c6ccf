package sysctl

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/routetable"
)

// recorder records the keys written, and fails those named in fail.
type recorder struct {
	keys []string
	fail string
}

func (r *recorder) Set(settings ...Setting) error {
	for _, s := range settings {
		if r.fail != "" && strings.Contains(s.Key, r.fail) {
			return errors.New("no such file")
		}
		r.keys = append(r.keys, s.Key)
	}
	return nil
}

func (r *recorder) take() []string {
	k := r.keys
	r.keys = nil
	slices.Sort(k)
	return k
}

func TestManager(t *testing.T) {
	rec := &recorder{}
	errs := prometheus.NewCounter(prometheus.CounterOpts{Name: "errors"})
	m := NewManager(rec, ManagerOptions{IsWorkloadInterface: func(n string) bool { return strings.HasPrefix(n, "cali") }, Errors: errs})
	ctx := context.Background()
	pass := func(what string, resync bool, want ...string) {
		t.Helper()
		if err := m.CompleteDeferredWork(ctx, resync); err != nil && rec.fail == "" {
			t.Fatalf("%s: %v", what, err)
		}
		if got := rec.take(); !slices.Equal(got, want) {
			t.Fatalf("%s: wrote %q, want %q", what, got, want)
		}
	}
	m.OnUpdate(routetable.LinksResync{Links: map[string]int{"eth0": 1, "cali1": 2}})
	pass("first pass", true, "net.ipv4.conf.cali1.forwarding", "net.ipv4.conf.cali1.proxy_arp", "net.ipv4.ip_forward", "net.ipv4.neigh.cali1.proxy_delay")
	pass("nothing changed", false)

	// IPv6 forwarding once an IPv6 pool exists, not for an IPv4 one.
	m.OnUpdate(model.PoolUpdate{Pool: model.Pool{Name: "v4", CIDR: netip.MustParsePrefix("10.244.0.0/16")}})
	pass("an IPv4 pool", false)
	m.OnUpdate(model.PoolUpdate{Pool: model.Pool{Name: "v6", CIDR: netip.MustParsePrefix("fd00:10:244::/48")}})
	pass("an IPv6 pool", false, "net.ipv6.conf.all.forwarding")
	pass("nothing changed", false)

	// A new veth; the same one again; one made again under the same name; one gone.
	m.OnUpdate(routetable.LinkUpdate{Name: "cali2", Index: 3})
	m.OnUpdate(routetable.LinkUpdate{Name: "eth1", Index: 4})
	pass("a new veth", false, "net.ipv4.conf.cali2.forwarding", "net.ipv4.conf.cali2.proxy_arp", "net.ipv4.neigh.cali2.proxy_delay")
	m.OnUpdate(routetable.LinkUpdate{Name: "cali2", Index: 3})
	pass("the veth again (up, down)", false)
	m.OnUpdate(routetable.LinkUpdate{Name: "cali2", Index: 5})
	pass("the veth made again", false, "net.ipv4.conf.cali2.forwarding", "net.ipv4.conf.cali2.proxy_arp", "net.ipv4.neigh.cali2.proxy_delay")
	m.OnUpdate(routetable.LinkUpdate{Name: "cali1", Index: 2, Gone: true})
	m.OnUpdate(routetable.LinkUpdate{Name: "cali1", Index: 2})
	pass("a veth gone and back", false, "net.ipv4.conf.cali1.forwarding", "net.ipv4.conf.cali1.proxy_arp", "net.ipv4.neigh.cali1.proxy_delay")

	// A failure is counted and tried again at the resync, not before.
	rec.fail = "cali3"
	m.OnUpdate(routetable.LinkUpdate{Name: "cali3", Index: 6})
	pass("a failing veth", false)
	if v := counter(errs); v != 1 {
		t.Fatalf("errors %v, want 1", v)
	}
	pass("not before the resync", false)
	rec.fail = ""
	m.OnUpdate(routetable.LinksResync{Links: map[string]int{"cali3": 6}})
	pass("the resync", true, "net.ipv4.conf.cali3.forwarding", "net.ipv4.conf.cali3.proxy_arp", "net.ipv4.ip_forward", "net.ipv4.neigh.cali3.proxy_delay", "net.ipv6.conf.all.forwarding")
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.Counter.GetValue()
}
