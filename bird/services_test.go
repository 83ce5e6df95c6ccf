package bird

import (
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// TestConfigRanges: both families, sorted, each once; the LoadBalancer pools are in the
// policy's set but never announced whole.
func TestConfigRanges(t *testing.T) {
	c := &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{
		ServiceClusterIPs:      []v1.ServiceCIDR{{CIDR: "2001:db8:96::/112"}, {CIDR: "203.0.113.0/26"}},
		ServiceExternalIPs:     []v1.ServiceCIDR{{CIDR: "203.0.113.0/26"}, {CIDR: "203.0.113.128/25"}},
		ServiceLoadBalancerIPs: []v1.ServiceCIDR{{CIDR: "198.51.100.224/28"}},
	}}
	r := configRanges(c, []netip.Prefix{netip.MustParsePrefix("198.51.100.240/28")})
	if got, want := fmtPrefixes(r.aggregates()), "[198.51.100.224/28 203.0.113.0/26 203.0.113.128/25 2001:db8:96::/112]"; got != want {
		t.Errorf("aggregates %s, want %s", got, want)
	}
	if got, want := fmtPrefixes(r.all()), "[198.51.100.224/28 198.51.100.240/28 203.0.113.0/26 203.0.113.128/25 2001:db8:96::/112]"; got != want {
		t.Errorf("all %s, want %s", got, want)
	}
	if got := configRanges(nil, nil).all(); len(got) != 0 {
		t.Errorf("no BGPConfiguration: %v", got)
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// TestServicePrefixes: what a node announces for one Service follows kube-proxy's data path.
func TestServicePrefixes(t *testing.T) {
	r := configRanges(&v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{
		ServiceClusterIPs:      []v1.ServiceCIDR{{CIDR: "203.0.113.0/26"}, {CIDR: "2001:db8:96::/112"}},
		ServiceExternalIPs:     []v1.ServiceCIDR{{CIDR: "203.0.113.64/26"}},
		ServiceLoadBalancerIPs: []v1.ServiceCIDR{{CIDR: "198.51.100.224/28"}},
	}}, []netip.Prefix{netip.MustParsePrefix("198.51.100.240/28"), netip.MustParsePrefix("2001:db8:ff::/120")})
	lb := model.Service{Key: "default/web", ClusterIPs: addrs("203.0.113.10", "2001:db8:96::10"),
		LoadBalancerIPs: addrs("198.51.100.241", "2001:db8:ff::5")}
	local := lb
	local.Local = true
	localHere := local
	localHere.LocalEndpoint = true
	withExternal := localHere
	withExternal.ExternalIPs = addrs("203.0.113.70", "198.51.100.7")
	foreign := lb
	foreign.LoadBalancerIPs = addrs("198.51.100.9") // another implementation's address, in no range
	byConfig := lb
	byConfig.LoadBalancerIPs = addrs("198.51.100.225")
	for _, tc := range []struct {
		name   string
		svc    model.Service
		want   string
		reason string
	}{
		{"Cluster: the LoadBalancer addresses from every node, the cluster IPs by their range", lb, "[198.51.100.241/32 2001:db8:ff::5/128]", reasonCluster},
		{"Local without an endpoint here: nothing", local, "[]", reasonNoEndpoint},
		{"Local with an endpoint here: every address in a range", localHere, "[198.51.100.241/32 203.0.113.10/32 2001:db8:96::10/128 2001:db8:ff::5/128]", reasonLocal},
		{"Local external IPs inside serviceExternalIPs only", withExternal, "[198.51.100.241/32 203.0.113.10/32 203.0.113.70/32 2001:db8:96::10/128 2001:db8:ff::5/128]", reasonLocal},
		{"an address outside every range and pool", foreign, "[]", reasonNoRange},
		{"an address inside serviceLoadBalancerIPs", byConfig, "[198.51.100.225/32]", reasonCluster},
		{"a ClusterIP Service: its range covers it", model.Service{Key: "default/db", ClusterIPs: addrs("203.0.113.11")}, "[]", reasonNoRange},
	} {
		got, reason := servicePrefixes(tc.svc, r)
		if fmtPrefixes(got) != tc.want || reason != tc.reason {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.name, fmtPrefixes(got), reason, tc.want, tc.reason)
		}
	}
}

// TestServiceInputs: a message marks the paths only when the host routes change; an address two
// Services share stays while either wants it; new ranges decide every Service again.
func TestServiceInputs(t *testing.T) {
	in := newInputs("node-1")
	pool := model.Pool{Name: "lb", CIDR: netip.MustParsePrefix("198.51.100.240/28"), Uses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}
	a := model.Service{Key: "default/a", LoadBalancerIPs: addrs("198.51.100.241")}
	b := model.Service{Key: "default/b", LoadBalancerIPs: addrs("198.51.100.241"), Local: true}
	steps := []struct {
		msg   any
		dirty dirtySet
		hosts string
	}{
		{model.ServiceUpdate{Service: a}, 0, "[]"}, // no pool yet: in no range
		{model.LoadBalancerPoolUpdate{Pool: pool}, dirtyPaths | dirtyPolicy | dirtyRoutes, "[198.51.100.241/32]"},
		{model.ServiceUpdate{Service: b}, 0, "[198.51.100.241/32]"}, // Local, no endpoint here
		{model.ServiceRemove{Key: a.Key}, dirtyPaths, "[]"},
		{model.ServiceUpdate{Service: withEndpoint(b)}, dirtyPaths, "[198.51.100.241/32]"},
		{model.ServiceUpdate{Service: withEndpoint(b)}, 0, "[198.51.100.241/32]"},
		{model.ServiceUpdate{Service: a}, 0, "[198.51.100.241/32]"}, // shared: counted twice
		{model.ServiceUpdate{Service: b}, 0, "[198.51.100.241/32]"}, // a still wants it
		{model.LoadBalancerPoolRemove{Name: "lb"}, dirtyPaths | dirtyPolicy | dirtyRoutes, "[]"},
	}
	for i, s := range steps {
		d := in.record(s.msg, false)
		if d != s.dirty {
			t.Errorf("step %d (%T): dirty %b, want %b", i, s.msg, d, s.dirty)
		}
		if got := fmtPrefixes(in.serviceHosts.list()); got != s.hosts {
			t.Errorf("step %d (%T): host routes %s, want %s", i, s.msg, got, s.hosts)
		}
	}
}

func withEndpoint(s model.Service) model.Service {
	s.LocalEndpoint = true
	return s
}
