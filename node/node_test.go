package node

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func parsePool(t *testing.T, name string, mode v1.IPIPMode, sel string, disabled bool) model.Pool {
	t.Helper()
	p, errs := validation.ParseIPPool(&v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.IPPoolSpec{CIDR: "10.244.0.0/16", IPIPMode: mode, NodeSelector: sel, Disabled: disabled}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return p
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
		{NodeName: "a", RunDir: "/run", BGPAddress: ipfamily.PairOf("cidr=2001:db8::/32", "")}, {NodeName: "a", RunDir: "/run", BGPAddress: ipfamily.PairOf("", "cidr=198.51.100.0/24")},
		// No address of either family: refused before the agent waits for its Node.
		{NodeName: "a", RunDir: "/run", BGPAddress: ipfamily.PairOf("none", "none")}, {NodeName: "a", RunDir: "/run", BGPAddress: ipfamily.PairOf("none", "")},
		// tabby-typha: one way to find it, a namespace/name, and a CA to verify it.
		{NodeName: "a", RunDir: "/run", TyphaService: "kube-system/tabby-typha", TyphaAddrs: []string{"198.51.100.5:5473"}, TyphaCAFile: "/ca"},
		{NodeName: "a", RunDir: "/run", TyphaService: "tabby-typha", TyphaCAFile: "/ca"},
		{NodeName: "a", RunDir: "/run", TyphaService: "kube-system/tabby-typha"},
		{NodeName: "a", RunDir: "/run", BGP: "off"}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: want an error", c)
		}
	}
	for _, c := range []Config{{NodeName: "a", RunDir: "/run"}, {NodeName: "a", RunDir: "/run", BGPAddress: ipfamily.PairOf("cidr=198.51.100.0/24", "none")},
		{NodeName: "a", RunDir: "/run", BGPAddress: ipfamily.PairOf("none", "cidr=2001:db8::/32")},
		{NodeName: "a", RunDir: "/run", TyphaService: "kube-system/tabby-typha", TyphaCAFile: "/ca"},
		{NodeName: "a", RunDir: "/run", BGP: BGPNone}, {NodeName: "a", RunDir: "/run", BGP: BGPBird}} {
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
