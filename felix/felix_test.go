package felix

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/sysctl"
	"github.com/tabbynet/tabby/internal/testwait"
)

type fakeSysctl struct {
	mu  sync.Mutex
	set map[string]string
}

func (s *fakeSysctl) Set(settings ...sysctl.Setting) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range settings {
		s.set[x.Key] = x.Value
	}
	return nil
}

func (s *fakeSysctl) get(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set[k]
}

func newFakeFelix(t *testing.T) (*Felix, *nl.Fake, *fakekernel.Kernel, *fakeSysctl) {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1400)
	fk.AddLink("cali0123456789a", 1500)
	fk.LinkAddErr = unix.EOPNOTSUPP // this kernel has no ipip
	kern, fs := fakekernel.New(), &fakeSysctl{set: map[string]string{}}
	f, err := New(Config{NodeName: "n1", UplinkInterface: uplink("eth0"), ResyncInterval: time.Hour}, WithNetlink(fk), WithCommandRunner(kern), WithSysctl(fs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, fk, kern, fs
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "UplinkInterface"},
		{Config{UplinkInterface: uplink("eth0"), TunnelMTU: 100}, "TunnelMTU 100"},
		{Config{UplinkInterface: uplink("eth0"), ResyncInterval: -time.Second}, "ResyncInterval -1s"},
		{Config{UplinkInterface: uplink("eth0"), IptablesBackend: "bpf"}, `IptablesBackend "bpf"`},
	} {
		_, err := New(tc.cfg, WithNetlink(nl.NewFake()), WithCommandRunner(fakekernel.New()), WithSysctl(&fakeSysctl{}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestRunProgramsAndReports(t *testing.T) {
	f, fk, kern, fs := newFakeFelix(t)
	srv := httptest.NewServer(f.HealthHandler())
	defer srv.Close()
	if code := get(t, srv.URL+"/readyz"); code != 503 {
		t.Fatalf("ready before the first apply: %d", code)
	}
	f.send(
		thisNode("198.51.100.11/24", "10.244.9.1"),
		pool("default", "10.244.0.0/16", v1.IPIPModeNever, true),
		pool("ipip", "10.245.0.0/16", v1.IPIPModeAlways, false),
		localBlock("10.244.0.0/26"),
		workload("cali0123456789a", "10.244.0.5"),
		learned("10.244.1.0/26", "198.51.100.12"),
		learned("10.244.2.0/26", "203.0.113.9"),   // no host route
		learned("10.245.1.0/26", "198.51.100.12"), // needs tunl0
	)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	testwait.Until(t, "routes programmed", 5*time.Second, func() bool {
		_, a := fk.Route("10.244.0.5/32")
		_, b := fk.Route("10.244.0.0/26")
		_, c := fk.Route("10.244.1.0/26")
		return a && b && c && f.Ready()
	})
	if code := get(t, srv.URL+"/readyz"); code != 200 {
		t.Fatalf("readyz %d after apply", code)
	}
	if _, ok := fk.Route("10.245.1.0/26"); ok {
		t.Fatal("tunnel route programmed without tunl0")
	}
	if u := f.Unresolved(); len(u) != 1 || !strings.Contains(u[netip.MustParsePrefix("10.244.2.0/26")], "no host route") {
		t.Fatalf("unresolved %v", u)
	}
	if v := value(f.metrics.UnresolvedNextHops); v != 1 {
		t.Fatalf("unresolved metric %v", v)
	}
	if v := value(f.metrics.ApplyErrors); v < 1 {
		t.Fatal("an apply that could not set up tunl0 not counted as failed")
	}
	if v := value(f.metrics.TunnelErrors); v < 1 {
		t.Fatal("tunnel error not counted")
	}
	if v := value(f.metrics.RoutesProgrammed.WithLabelValues("workload")); v != 1 {
		t.Fatalf("workload routes metric %v", v)
	}
	if fs.get("net.ipv4.ip_forward") != "1" || fs.get("net.ipv4.conf.cali0123456789a.proxy_arp") != "1" || fs.get("net.ipv4.neigh.cali0123456789a.proxy_delay") != "0" {
		t.Fatalf("sysctls %v", fs.set)
	}
	sets := kern.Sets()
	if m, a := sets["tabby-masq-ipam-pools"].Members, sets["tabby-all-ipam-pools"].Members; len(m) != 1 || len(a) != 2 {
		t.Fatalf("nat sets: masq %v all %v", m, a)
	}
	if rules := kern.Chains("iptables-nft", "nat")["POSTROUTING"]; len(rules) != 1 || rules[0] != "-j tabby-POSTROUTING" {
		t.Fatalf("POSTROUTING %q", rules)
	}

	// A new cali veth gets its sysctls; the route of a pod on it follows the link.
	fk.AddLink("calibbbbbbbbbbb", 1500)
	f.send(workload("calibbbbbbbbbbb", "10.244.0.6"))
	testwait.Until(t, "second workload", 5*time.Second, func() bool {
		_, ok := fk.Route("10.244.0.6/32")
		return ok && fs.get("net.ipv4.conf.calibbbbbbbbbbb.forwarding") == "1"
	})
	// A host route to the unresolved next hop appears: the route is programmed.
	f.send(learned("10.244.1.0/26", "198.51.100.12"), withdrawn("10.244.1.0/26"))
	testwait.Until(t, "withdrawn route removed", 5*time.Second, func() bool { _, ok := fk.Route("10.244.1.0/26"); return !ok })
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := httptestClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// tunl0 is looked at when what it should be may have changed (pools, the tunnel address), after a
// link event on it or its uplink, and on a resync; a BGP route coming or going, on every node for
// every block of the cluster, costs it nothing.
func TestTunnelLeftAloneByRouteChanges(t *testing.T) {
	f, fk, _, _ := newFakeFelix(t)
	ctx := context.Background()
	f.send(thisNode("198.51.100.11/24", ""), pool("default", "10.244.0.0/16", v1.IPIPModeNever, false))
	if err := f.ApplyNow(ctx); err != nil {
		t.Fatal(err)
	}
	looks := func() int { return fk.Calls("LinkByName") }
	before := looks()
	if before == 0 {
		t.Fatal("the first apply did not look at tunl0")
	}
	for _, p := range []string{"10.244.1.0/26", "10.244.2.0/26"} {
		f.send(learned(p, "198.51.100.12"))
		if err := f.ApplyNow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.send(withdrawn("10.244.1.0/26"))
	if err := f.ApplyNow(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := fk.Route("10.244.2.0/26"); !ok {
		t.Fatal("BGP route not programmed")
	}
	if _, ok := fk.Route("10.244.1.0/26"); ok {
		t.Fatal("withdrawn BGP route still programmed")
	}
	if n := looks() - before; n != 0 {
		t.Fatalf("BGP route changes looked up links %d times, want 0", n)
	}

	// A pool that needs IPIP: tunl0 is wanted (and this kernel cannot make it).
	f.send(pool("default", "10.244.0.0/16", v1.IPIPModeAlways, false))
	if err := f.ApplyNow(ctx); err == nil || !strings.Contains(err.Error(), "tunl0") {
		t.Fatalf("apply with an IPIP pool on a kernel without ipip: %v, want tunl0's error", err)
	}
	// A failed tunnel is tried again on the next apply, whatever changed.
	before = looks()
	f.send(learned("10.244.3.0/26", "198.51.100.12"))
	if err := f.ApplyNow(ctx); err == nil {
		t.Fatal("apply after a failed tunnel: no error")
	}
	if looks() == before {
		t.Fatal("a failed tunnel was not tried again")
	}

	// Back to no IPIP; then a resync looks again.
	f.send(pool("default", "10.244.0.0/16", v1.IPIPModeNever, false))
	if err := f.ApplyNow(ctx); err != nil {
		t.Fatal(err)
	}
	before = looks()
	f.QueueResync()
	if err := f.ApplyNow(ctx); err != nil {
		t.Fatal(err)
	}
	if looks() == before {
		t.Fatal("a resync did not look at tunl0")
	}
}

// A BGP route learned, replaced or withdrawn changes its own prefix's route and unresolved
// state, as a full recompute would.
func TestBGPRouteOneByOne(t *testing.T) {
	f, fk, _, _ := newFakeFelix(t)
	ctx := context.Background()
	f.send(thisNode("198.51.100.11/24", ""), pool("default", "10.244.0.0/16", v1.IPIPModeNever, false), localBlock("10.244.0.0/26"))
	if err := f.ApplyNow(ctx); err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix("10.244.1.0/26")
	step := func(what string, nh string, wantGw string, wantUnresolved bool) {
		t.Helper()
		if nh == "" {
			f.send(withdrawn(p.String()))
		} else {
			f.send(learned(p.String(), nh))
		}
		if err := f.ApplyNow(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r, ok := fk.Route(p.String())
		switch {
		case wantGw == "" && ok:
			t.Fatalf("%s: route %v programmed, want none", what, r)
		case wantGw != "" && (!ok || r.Gw.String() != wantGw):
			t.Fatalf("%s: route %v (programmed %v), want via %s", what, r, ok, wantGw)
		}
		_, unresolved := f.Unresolved()[p]
		if unresolved != wantUnresolved || value(f.metrics.UnresolvedNextHops) != map[bool]float64{true: 1}[wantUnresolved] {
			t.Fatalf("%s: unresolved %v (metric %v), want %v", what, f.Unresolved(), value(f.metrics.UnresolvedNextHops), wantUnresolved)
		}
	}
	step("learned", "198.51.100.12", "198.51.100.12", false)
	step("replaced by an unusable next hop", "2001:db8::1", "", true)
	step("replaced by a usable one", "198.51.100.13", "198.51.100.13", false)
	step("our own next hop", "198.51.100.11", "", false)
	step("learned again", "198.51.100.12", "198.51.100.12", false)
	step("withdrawn", "", "", false)
	// A BGP route for our own block never replaces its blackhole.
	f.send(learned("10.244.0.0/26", "198.51.100.12"))
	if err := f.ApplyNow(ctx); err != nil {
		t.Fatal(err)
	}
	if r, ok := fk.Route("10.244.0.0/26"); !ok || r.Type != unix.RTN_BLACKHOLE {
		t.Fatalf("local block's route %v (programmed %v), want the blackhole", r, ok)
	}
	// Nor does it take over while the block is ours; it does once the block is released.
	f.send(withdrawn("10.244.0.0/26"), learned("10.244.0.0/26", "198.51.100.13"))
	if err := f.ApplyNow(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := fk.Route("10.244.0.0/26"); r.Type != unix.RTN_BLACKHOLE {
		t.Fatalf("local block's route %v, want the blackhole", r)
	}
	f.send(model.BlockRemove{CIDR: netip.MustParsePrefix("10.244.0.0/26")})
	if err := f.ApplyNow(ctx); err != nil {
		t.Fatal(err)
	}
	if r, ok := fk.Route("10.244.0.0/26"); !ok || r.Gw.String() != "198.51.100.13" {
		t.Fatalf("released block's route %v (programmed %v), want the learned one via 198.51.100.13", r, ok)
	}
}

// An apply's lag runs from the oldest input change it takes, not from its own start: a change
// that waited for the loop (behind a long apply, on a busy node) counts its wait; an apply with
// no change of input (a timer's) is not a sample.
func TestApplyLagCountsTheWait(t *testing.T) {
	f, fk, _, _ := newFakeFelix(t)
	f.send(thisNode("198.51.100.11/24", ""), pool("default", "10.244.0.0/16", v1.IPIPModeNever, false), localBlock("10.244.0.0/26"))
	ctx := context.Background()
	// The fake kernel has no ipip: tunl0's error is expected and beside the point.
	_ = f.ApplyNow(ctx)
	n0, _ := histogram(f.metrics.ApplyLag)
	if n0 != 1 {
		t.Fatalf("the first apply took a change: %d lag samples, want 1", n0)
	}
	_ = f.ApplyNow(ctx)
	if n, _ := histogram(f.metrics.ApplyLag); n != n0 {
		t.Fatalf("an apply with nothing changed made a lag sample (%d, were %d)", n, n0)
	}
	_, s0 := histogram(f.metrics.ApplyLag)
	f.send(learned("10.244.1.0/26", "198.51.100.12"))
	const wait = 30 * time.Millisecond
	time.Sleep(wait) // the change waits for the loop
	f.send(learned("10.244.2.0/26", "198.51.100.12"))
	_ = f.ApplyNow(ctx)
	if _, ok := fk.Route("10.244.2.0/26"); !ok {
		t.Fatal("the second route was not applied")
	}
	n, s := histogram(f.metrics.ApplyLag)
	if n != n0+1 || s-s0 < wait.Seconds() {
		t.Fatalf("two changes, %v apart, in one apply: %d new samples of %.3f s, want one of at least %v (from the older)", wait, n-n0, s-s0, wait)
	}
}
