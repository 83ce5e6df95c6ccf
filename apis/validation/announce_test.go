package validation

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// A Service is announced when it has a cluster IP, kube-proxy forwards it and it is not opted
// out; its addresses are parsed, sorted and each listed once, and one that does not parse is
// reported with its field and left out.
func TestAnnouncedService(t *testing.T) {
	svc := func(mod func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10", "fd00:10:96::a"}}}
		mod(s)
		return s
	}
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	for _, c := range []struct {
		what     string
		svc      *corev1.Service
		announce bool
		want     model.Service
		errs     string
	}{
		{"dual-stack LoadBalancer, Local", svc(func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.ExternalIPs = []string{"203.0.113.9", "198.51.100.9", "203.0.113.9"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "2001:db8::10"}, {Hostname: "lb.example"}, {IP: "203.0.113.10"}}
		}), true, model.Service{Key: "apps/web", ClusterIPs: addrs("10.96.0.10", "fd00:10:96::a"), ExternalIPs: addrs("198.51.100.9", "203.0.113.9"),
			LoadBalancerIPs: addrs("203.0.113.10", "2001:db8::10"), Local: true}, ""},
		{"only spec.clusterIP", svc(func(s *corev1.Service) { s.Spec.ClusterIPs = nil }), true,
			model.Service{Key: "apps/web", ClusterIPs: addrs("10.96.0.10")}, ""},
		{"addresses that do not parse", svc(func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.9", "203.0.113.300"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example"}, {IP: "fe80::1%eth0"}}
		}), true, model.Service{Key: "apps/web", ClusterIPs: addrs("10.96.0.10", "fd00:10:96::a"), ExternalIPs: addrs("203.0.113.9")},
			`spec.externalIPs[1]: Invalid value: "203.0.113.300"` + "|" + `status.loadBalancer.ingress[1].ip: Invalid value: "fe80::1%eth0"`},
		{"headless", svc(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
		}), false, model.Service{}, ""},
		{"ExternalName", svc(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "", nil, "db.example"
		}), false, model.Service{}, ""},
		{"another service proxy", svc(func(s *corev1.Service) { s.Labels = map[string]string{v1.LabelServiceProxyName: "other"} }), false, model.Service{}, ""},
		{"no longer a LoadBalancer, its status not yet cleared", svc(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}
		}), true, model.Service{Key: "apps/web", ClusterIPs: addrs("10.96.0.10", "fd00:10:96::a")}, ""},
		{"advertise false", svc(func(s *corev1.Service) { s.Annotations = map[string]string{v1.AnnotationAdvertise: "false"} }), false, model.Service{}, ""},
		{"advertise true", svc(func(s *corev1.Service) { s.Annotations = map[string]string{v1.AnnotationAdvertise: "true"} }), true,
			model.Service{Key: "apps/web", ClusterIPs: addrs("10.96.0.10", "fd00:10:96::a")}, ""},
	} {
		got, ok, errs := AnnouncedService(c.svc)
		if ok != c.announce || !got.Equal(c.want) {
			t.Errorf("%s: %+v announced %v, want %+v %v", c.what, got, ok, c.want, c.announce)
		}
		var es []string
		for _, e := range errs {
			es = append(es, e.Error())
		}
		if c.errs == "" && len(es) > 0 || c.errs != "" && !matchAll(es, strings.Split(c.errs, "|")) {
			t.Errorf("%s: errors %v, want %s", c.what, es, c.errs)
		}
	}
}

func matchAll(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			return false
		}
	}
	return true
}
