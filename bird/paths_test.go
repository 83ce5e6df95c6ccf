package bird

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// TestDesiredPaths: each prefix goes out with this node's address of its family; one of a
// family the node has no address of is left out.
func TestDesiredPaths(t *testing.T) {
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	own := []netip.Prefix{p("10.244.1.0/26"), p("10.244.2.7/32"), p("fd00:10:244:1::/122")}
	services := []netip.Prefix{p("203.0.113.0/26"), p("2001:db8:96::/112")}
	for _, c := range []struct {
		name    string
		nextHop ipfamily.Pair[netip.Addr]
		want    map[netip.Prefix]netip.Addr
	}{
		{"dual-stack", ipfamily.PairOf(a("198.51.100.1"), a("2001:db8:100::1")), map[netip.Prefix]netip.Addr{
			p("10.244.1.0/26"): a("198.51.100.1"), p("10.244.2.7/32"): a("198.51.100.1"), p("203.0.113.0/26"): a("198.51.100.1"),
			p("fd00:10:244:1::/122"): a("2001:db8:100::1"), p("2001:db8:96::/112"): a("2001:db8:100::1")}},
		{"IPv4 only", ipfamily.PairOf(a("198.51.100.1"), netip.Addr{}), map[netip.Prefix]netip.Addr{
			p("10.244.1.0/26"): a("198.51.100.1"), p("10.244.2.7/32"): a("198.51.100.1"), p("203.0.113.0/26"): a("198.51.100.1")}},
		{"IPv6 only", ipfamily.PairOf(netip.Addr{}, a("2001:db8:100::1")), map[netip.Prefix]netip.Addr{
			p("fd00:10:244:1::/122"): a("2001:db8:100::1"), p("2001:db8:96::/112"): a("2001:db8:100::1")}},
	} {
		got := desiredPaths(own, services, c.nextHop)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
}

// TestPathReconciler: withdrawals and additions are separate steps (the policy goes between);
// a path whose next hop changed is withdrawn and advertised again; what failed stays to do.
func TestPathReconciler(t *testing.T) {
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	nh, nh2 := a("198.51.100.1"), a("198.51.100.2")
	paths := func(kv ...any) map[netip.Prefix]netip.Addr {
		m := map[netip.Prefix]netip.Addr{}
		for i := 0; i < len(kv); i += 2 {
			m[p(kv[i].(string))] = kv[i+1].(netip.Addr)
		}
		return m
	}
	for _, c := range []struct {
		name       string
		advertised map[netip.Prefix]netip.Addr
		want       map[netip.Prefix]netip.Addr
		fail       string
		withdraw   []string
		advertise  []string
		after      map[netip.Prefix]netip.Addr
	}{
		{name: "first paths", advertised: paths(), want: paths("10.244.1.0/26", nh, "10.244.2.0/26", nh),
			advertise: []string{"add path 10.244.1.0/26 via 198.51.100.1", "add path 10.244.2.0/26 via 198.51.100.1"},
			after:     paths("10.244.1.0/26", nh, "10.244.2.0/26", nh)},
		{name: "nothing changed", advertised: paths("10.244.1.0/26", nh), want: paths("10.244.1.0/26", nh), after: paths("10.244.1.0/26", nh)},
		{name: "one gone, one new", advertised: paths("10.244.1.0/26", nh), want: paths("10.244.2.0/26", nh),
			withdraw: []string{"delete path 10.244.1.0/26 via 198.51.100.1"}, advertise: []string{"add path 10.244.2.0/26 via 198.51.100.1"},
			after: paths("10.244.2.0/26", nh)},
		{name: "next hop changed", advertised: paths("10.244.1.0/26", nh), want: paths("10.244.1.0/26", nh2),
			withdraw: []string{"delete path 10.244.1.0/26 via 198.51.100.1"}, advertise: []string{"add path 10.244.1.0/26 via 198.51.100.2"},
			after: paths("10.244.1.0/26", nh2)},
		{name: "a withdrawal fails", advertised: paths("10.244.1.0/26", nh), want: paths(), fail: "delete path",
			withdraw: []string{"delete path 10.244.1.0/26 via 198.51.100.1"}, after: paths("10.244.1.0/26", nh)},
		{name: "an addition fails", advertised: paths(), want: paths("10.244.1.0/26", nh), fail: "add path",
			advertise: []string{"add path 10.244.1.0/26 via 198.51.100.1"}, after: paths()},
	} {
		t.Run(c.name, func(t *testing.T) {
			spk := newFakeSpeaker()
			if c.fail != "" {
				spk.fail[c.fail] = 1
			}
			r := pathReconciler{advertised: c.advertised}
			err := r.withdraw(context.Background(), spk, c.want)
			if got := spk.takeCalls(); !slices.Equal(got, c.withdraw) {
				t.Errorf("withdraw: calls %q, want %q", got, c.withdraw)
			}
			err2 := r.advertise(context.Background(), spk, c.want)
			if got := spk.takeCalls(); !slices.Equal(got, c.advertise) {
				t.Errorf("advertise: calls %q, want %q", got, c.advertise)
			}
			if (err != nil || err2 != nil) != (c.fail != "") {
				t.Errorf("errors %v, %v", err, err2)
			}
			if len(r.advertised) != len(c.after) {
				t.Fatalf("advertised %v, want %v", r.advertised, c.after)
			}
			for k, v := range c.after {
				if r.advertised[k] != v {
					t.Errorf("advertised %v, want %v", r.advertised, c.after)
				}
			}
		})
	}
}
