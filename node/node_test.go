package node

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/node/syncer"
)

func TestNeedsTunnel(t *testing.T) {
	pool := func(mode v1.IPIPMode, sel string, disabled bool) model.Pool {
		p, errs := validation.ParseIPPool(&v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.IPPoolSpec{CIDR: "10.244.0.0/16", IPIPMode: mode, NodeSelector: sel, Disabled: disabled}})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return p
	}
	local := &syncer.NodeInfo{Name: "a", Labels: map[string]string{"zone": "x"}}
	for _, tc := range []struct {
		name string
		s    syncer.Snapshot
		want bool
	}{
		{"no local node yet", syncer.Snapshot{Pools: []model.Pool{pool(v1.IPIPModeAlways, "", false)}}, false},
		{"never", syncer.Snapshot{Local: local, Pools: []model.Pool{pool(v1.IPIPModeNever, "", false)}}, false},
		{"cross-subnet selects us", syncer.Snapshot{Local: local, Pools: []model.Pool{pool(v1.IPIPModeCrossSubnet, "zone == 'x'", false)}}, true},
		{"always, other zone", syncer.Snapshot{Local: local, Pools: []model.Pool{pool(v1.IPIPModeAlways, "zone == 'y'", false)}}, false},
		{"always but disabled", syncer.Snapshot{Local: local, Pools: []model.Pool{pool(v1.IPIPModeAlways, "", true)}}, false},
	} {
		if got := needsTunnel(tc.s); got != tc.want {
			t.Errorf("%s: needsTunnel = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBirdNodes(t *testing.T) {
	got := birdNodes([]syncer.NodeInfo{
		{Name: "a", BGPAddress: netip.MustParsePrefix("198.51.100.11/25"), BGPAddress6: netip.MustParsePrefix("2001:db8:100::11/64"), ASN: 65001, RRClusterID: "244.0.0.1"},
		{Name: "b", InternalIP: netip.MustParseAddr("198.51.100.12")}, // not annotated yet
		{Name: "c"}, // nothing known: no address
	})
	want := []model.Node{
		{Name: "a", BGPAddress: ipfamily.PairOf(netip.MustParsePrefix("198.51.100.11/25"), netip.MustParsePrefix("2001:db8:100::11/64")), ASN: 65001, RRClusterID: "244.0.0.1"},
		{Name: "b", InternalIP: ipfamily.PairOf(netip.MustParseAddr("198.51.100.12"), netip.Addr{})},
		{Name: "c"},
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("node %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// bird reaches the node not annotated yet at its InternalIP.
	if a := peers.BGPAddress(got[1]).Get(ipfamily.IPv4); a != netip.MustParsePrefix("198.51.100.12/32") {
		t.Errorf("BGP address of a node not annotated yet: %v", a)
	}
}

func TestAllEstablished(t *testing.T) {
	if !allEstablished(nil) {
		t.Error("no peers: nothing to wait for")
	}
	if allEstablished([]bird.PeerStatus{{State: "established"}, {State: "active"}}) {
		t.Error("one session down: not all established")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{RunDir: "/run"}, {NodeName: "a"}, {NodeName: "a", RunDir: "/run", Shutdown: "sometimes"},
		{NodeName: "a", RunDir: "/run", BGPAddress: "cidr=2001:db8::/32"}, {NodeName: "a", RunDir: "/run", BGPAddress6: "cidr=198.51.100.0/24"},
		// No address of either family: refused before the agent waits for its Node.
		{NodeName: "a", RunDir: "/run", BGPAddress: "none", BGPAddress6: "none"}, {NodeName: "a", RunDir: "/run", BGPAddress: "none"},
		// tabby-typha: one way to find it, a namespace/name, and a CA to verify it.
		{NodeName: "a", RunDir: "/run", TyphaService: "kube-system/tabby-typha", TyphaAddrs: []string{"198.51.100.5:5473"}, TyphaCAFile: "/ca"},
		{NodeName: "a", RunDir: "/run", TyphaService: "tabby-typha", TyphaCAFile: "/ca"},
		{NodeName: "a", RunDir: "/run", TyphaService: "kube-system/tabby-typha"}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: want an error", c)
		}
	}
	for _, c := range []Config{{NodeName: "a", RunDir: "/run"}, {NodeName: "a", RunDir: "/run", BGPAddress: "cidr=198.51.100.0/24", BGPAddress6: "none"},
		{NodeName: "a", RunDir: "/run", BGPAddress: "none", BGPAddress6: "cidr=2001:db8::/32"},
		{NodeName: "a", RunDir: "/run", TyphaService: "kube-system/tabby-typha", TyphaCAFile: "/ca"}} {
		if err := c.Validate(); err != nil {
			t.Error(err)
		}
	}
}

func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		a := &Agent{cfg: Config{Pprof: on}, reg: prometheus.NewRegistry()}
		rec := httptest.NewRecorder()
		a.metricsMux().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil))
		if got := rec.Code == http.StatusOK; got != on {
			t.Errorf("--pprof=%v: /debug/pprof/heap answered %d", on, rec.Code)
		}
		rec = httptest.NewRecorder()
		a.metricsMux().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("/metrics answered %d", rec.Code)
		}
	}
}
