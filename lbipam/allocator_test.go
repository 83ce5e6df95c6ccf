package lbipam

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func pool(name, cidr string, mods ...func(*model.Pool)) model.Pool {
	p := model.Pool{Name: name, CIDR: netip.MustParsePrefix(cidr), Uses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}, AssignmentMode: v1.AssignmentModeAutomatic}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func manual(p *model.Pool)   { p.AssignmentMode = v1.AssignmentModeManual }
func disabled(p *model.Pool) { p.Disabled = true }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func req(key string, mods ...func(*Request)) Request {
	r := Request{Key: key, Created: t0, Families: []ipfamily.Family{ipfamily.IPv4}, RequireAll: true, Ports: []string{"TCP/80"}}
	for _, m := range mods {
		m(&r)
	}
	return r
}

func ask(addrs ...string) func(*Request) {
	return func(r *Request) {
		for _, a := range addrs {
			r.Addresses = append(r.Addresses, netip.MustParseAddr(a))
		}
	}
}
func v6(r *Request) { r.Families = []ipfamily.Family{ipfamily.IPv6} }
func dual(require bool) func(*Request) {
	return func(r *Request) { r.Families, r.RequireAll = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}, require }
}
func share(key string, ports ...string) func(*Request) {
	return func(r *Request) { r.SharingKey, r.Ports = key, ports }
}
func v4pools(n ...string) func(*Request) { return func(r *Request) { r.Pools.Set(ipfamily.IPv4, n) } }
func later(d time.Duration) func(*Request) {
	return func(r *Request) { r.Created = t0.Add(d) }
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestAllocate(t *testing.T) {
	type held struct {
		r     Request
		addrs []string
	}
	for _, tc := range []struct {
		name  string
		pools []model.Pool
		held  []held
		r     Request
		want  []string
		why   string // a refusal containing this
	}{
		{name: "first free", pools: []model.Pool{pool("a", "198.51.100.0/30")}, r: req("ns/s"), want: []string{"198.51.100.0"}},
		{name: "skips taken", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/x"), []string{"198.51.100.0"}}}, r: req("ns/s"), want: []string{"198.51.100.1"}},
		{name: "exhausted", pools: []model.Pool{pool("a", "198.51.100.0/32")}, held: []held{{req("ns/x"), []string{"198.51.100.0"}}}, r: req("ns/s"), why: "a (198.51.100.0/32) is full"},
		{name: "manual skipped", pools: []model.Pool{pool("m", "198.51.100.0/30", manual)}, r: req("ns/s"), why: "m is Manual"},
		{name: "manual named", pools: []model.Pool{pool("m", "198.51.100.0/30", manual)}, r: req("ns/s", v4pools("m")), want: []string{"198.51.100.0"}},
		{name: "manual by CIDR", pools: []model.Pool{pool("m", "198.51.100.0/30", manual)}, r: req("ns/s", v4pools("198.51.100.0/30")), want: []string{"198.51.100.0"}},
		{name: "manual address asked", pools: []model.Pool{pool("m", "198.51.100.0/30", manual)}, r: req("ns/s", ask("198.51.100.2")), want: []string{"198.51.100.2"}},
		{name: "disabled", pools: []model.Pool{pool("d", "198.51.100.0/30", disabled), pool("e", "203.0.113.0/30")}, r: req("ns/s"), want: []string{"203.0.113.0"}},
		{name: "disabled only", pools: []model.Pool{pool("d", "198.51.100.0/30", disabled)}, r: req("ns/s"), why: "d is disabled"},
		{name: "asked outside pools", pools: []model.Pool{pool("a", "198.51.100.0/30")}, r: req("ns/s", ask("203.0.113.9")), why: "203.0.113.9 is in no LoadBalancer pool"},
		{name: "asked taken", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/x"), []string{"198.51.100.1"}}}, r: req("ns/s", ask("198.51.100.1")), why: "held by ns/x"},
		{name: "named pool missing", pools: []model.Pool{pool("a", "198.51.100.0/30")}, r: req("ns/s", v4pools("nope")), why: "nope is no LoadBalancer pool"},
		{name: "named pools only", pools: []model.Pool{pool("a", "198.51.100.0/30"), pool("b", "203.0.113.0/30")}, r: req("ns/s", v4pools("b")), want: []string{"203.0.113.0"}},
		{name: "ipv6", pools: []model.Pool{pool("a", "198.51.100.0/30"), pool("b", "2001:db8:1::/126")}, r: req("ns/s", v6), want: []string{"2001:db8:1::"}},
		{name: "ipv6 huge pool", pools: []model.Pool{pool("b", "2001:db8:1::/64")}, held: []held{{req("ns/x", v6), []string{"2001:db8:1::"}}}, r: req("ns/s", v6), want: []string{"2001:db8:1::1"}},
		{name: "dual", pools: []model.Pool{pool("a", "198.51.100.0/30"), pool("b", "2001:db8:1::/126")}, r: req("ns/s", dual(true)), want: []string{"198.51.100.0", "2001:db8:1::"}},
		{name: "dual required, v6 exhausted", pools: []model.Pool{pool("a", "198.51.100.0/30"), pool("b", "2001:db8:1::/128")}, held: []held{{req("ns/x", v6), []string{"2001:db8:1::"}}}, r: req("ns/s", dual(true)), why: "no free IPv6 address: b (2001:db8:1::/128) is full"},
		{name: "dual preferred, v6 exhausted", pools: []model.Pool{pool("a", "198.51.100.0/30"), pool("b", "2001:db8:1::/128")}, held: []held{{req("ns/x", v6), []string{"2001:db8:1::"}}}, r: req("ns/s", dual(false)), want: []string{"198.51.100.0"}},
		{name: "family mismatch", pools: []model.Pool{pool("b", "2001:db8:1::/126")}, r: req("ns/s", ask("2001:db8:1::1")), why: "ipFamilies"},
		{name: "shared", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/x", share("k", "TCP/80")), []string{"198.51.100.0"}}}, r: req("ns/s", share("k", "TCP/443")), want: []string{"198.51.100.0"}},
		{name: "shared, port clash", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/x", share("k", "TCP/80")), []string{"198.51.100.0"}}}, r: req("ns/s", share("k", "TCP/80")), want: []string{"198.51.100.1"}},
		{name: "shared asked, port clash", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/x", share("k", "TCP/80")), []string{"198.51.100.0"}}}, r: req("ns/s", share("k", "TCP/80"), ask("198.51.100.0")), why: "uses port TCP/80 too"},
		{name: "other key", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/x", share("k", "TCP/80")), []string{"198.51.100.0"}}}, r: req("ns/s", share("j", "TCP/443"), ask("198.51.100.0")), why: "another sharing key"},
		{name: "local vs cluster", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/x", share("k", "TCP/80"), func(r *Request) { r.Backend = "selector:app=x" }), []string{"198.51.100.0"}}}, r: req("ns/s", share("k", "TCP/443"), ask("198.51.100.0")), why: "externalTrafficPolicy"},
		{name: "keeps its own", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/s"), []string{"198.51.100.3"}}}, r: req("ns/s"), want: []string{"198.51.100.3"}},
		{name: "keeps it when its pool is gone", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/s"), []string{"203.0.113.7"}}}, r: req("ns/s"), want: []string{"203.0.113.7"}},
		{name: "moves to the asked address", pools: []model.Pool{pool("a", "198.51.100.0/30")}, held: []held{{req("ns/s"), []string{"198.51.100.3"}}}, r: req("ns/s", ask("198.51.100.2")), want: []string{"198.51.100.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New()
			a.SetPools(tc.pools)
			for _, h := range tc.held {
				if c := a.Claim(h.r, addrs(h.addrs...)); len(c) > 0 {
					t.Fatalf("claim: %+v", c)
				}
			}
			d, err := a.Allocate(tc.r)
			if tc.why != "" {
				if err == nil || !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("want a refusal with %q, got %v, %v", tc.why, d.Addresses, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(d.Addresses, addrs(tc.want...)) {
				t.Fatalf("got %v, want %v", d.Addresses, tc.want)
			}
		})
	}
}

func TestClaimConflictOlderWins(t *testing.T) {
	a := New()
	a.SetPools([]model.Pool{pool("a", "198.51.100.0/30")})
	x := addrs("198.51.100.1")
	if c := a.Claim(req("ns/new", later(time.Hour)), x); len(c) != 0 {
		t.Fatal(c)
	}
	c := a.Claim(req("ns/old"), x)
	if len(c) != 1 || c[0].Loser != "ns/new" || c[0].Winner != "ns/old" {
		t.Fatalf("the older Service must keep the address: %+v", c)
	}
	if len(a.Held("ns/new")) != 0 || !slices.Equal(a.Held("ns/old"), x) {
		t.Fatalf("held: new %v old %v", a.Held("ns/new"), a.Held("ns/old"))
	}
	c = a.Claim(req("ns/newer", later(2*time.Hour)), x)
	if len(c) != 1 || c[0].Loser != "ns/newer" || len(a.Held("ns/newer")) != 0 {
		t.Fatalf("a later claim loses: %+v", c)
	}
	a.Release("ns/old")
	if got := a.Holders(x[0]); len(got) != 0 {
		t.Fatalf("released address still held by %v", got)
	}
}

func TestUsage(t *testing.T) {
	a := New()
	a.SetPools([]model.Pool{pool("a", "198.51.100.0/30"), pool("b", "2001:db8:1::/64"), {Name: "pods", CIDR: netip.MustParsePrefix("10.244.0.0/16")}})
	a.Claim(req("ns/s"), addrs("198.51.100.1"))
	u := a.Usage()
	if len(u) != 2 || u[0].InUse != 1 || u[0].Free != 3 || u[1].Free != 1<<64 {
		t.Fatalf("usage %+v", u)
	}
}

func TestFromService(t *testing.T) {
	prefer := corev1.IPFamilyPolicyPreferDualStack
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", Annotations: map[string]string{
			v1.AnnotationMetalLBLoadBalancerIPs: "198.51.100.5, 2001:db8::5",
			v1.AnnotationIPv4Pools:              `["lb-a"]`,
			v1.AnnotationMetalLBAllowSharedIP:   "k",
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, IPFamilyPolicy: &prefer,
			Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}, {Port: 80}}, LoadBalancerIP: "198.51.100.9"},
	}
	r, err := FromService(s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Addresses, addrs("198.51.100.5", "2001:db8::5")) || r.RequireAll || r.SharingKey != "k" ||
		!slices.Equal(r.Pools.Get(ipfamily.IPv4), []string{"lb-a"}) || !slices.Equal(r.Ports, []string{"UDP/53", "TCP/80"}) ||
		!slices.Equal(r.Families, []ipfamily.Family{ipfamily.IPv6, ipfamily.IPv4}) {
		t.Fatalf("%+v", r)
	}
	s.Annotations = map[string]string{v1.AnnotationLoadBalancerIPs: `["198.51.100.6"]`}
	if r, _ = FromService(s); !slices.Equal(r.Addresses, addrs("198.51.100.6")) {
		t.Fatalf("tabby's annotation: %v", r.Addresses)
	}
	s.Annotations = nil
	if r, _ = FromService(s); !slices.Equal(r.Addresses, addrs("198.51.100.9")) {
		t.Fatalf("spec.loadBalancerIP: %v", r.Addresses)
	}
	for _, bad := range []map[string]string{{v1.AnnotationLoadBalancerIPs: "nope"}, {v1.AnnotationLoadBalancerIPs: "198.51.100.1,198.51.100.2"}, {v1.AnnotationIPv6Pools: "[1"}} {
		s.Annotations = bad
		if _, err := FromService(s); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	class := "other"
	s.Spec.LoadBalancerClass = &class
	if ServiceOf(s) {
		t.Fatal("another class's Service is not tabby's")
	}
}
