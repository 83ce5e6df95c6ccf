package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/lbipam/controller"
)

func TestServiceGetsAnAddress(t *testing.T) {
	s := newScene(t, "lb-get=198.51.100.0/30")
	s.run(nil)
	s.create(service("web"))
	s.addrs("web", "198.51.100.0")
	s.event("web", controller.ReasonAssigned, "198.51.100.0")
	// Another class's Service is not tabby's; a ClusterIP Service neither.
	other := "example.com/lb"
	s.create(service("other", func(svc *corev1.Service) { svc.Spec.LoadBalancerClass = &other }))
	s.create(service("tabbys", func(svc *corev1.Service) { c := v1.LoadBalancerClass; svc.Spec.LoadBalancerClass = &c }))
	s.addrs("tabbys", "198.51.100.1")
	if got := ips(s.get("other")); len(got) != 0 {
		t.Fatalf("another class's Service got %v", got)
	}
}

func TestRequestedAddresses(t *testing.T) {
	s := newScene(t, "lb-req=198.51.100.8/29", "lb-req6=2001:db8:8::/125")
	s.run(nil)
	s.create(service("tabby", annotate(v1.AnnotationLoadBalancerIPs, `["198.51.100.13"]`)))
	s.create(service("metallb", annotate(v1.AnnotationMetalLBLoadBalancerIPs, "198.51.100.14")))
	s.create(service("spec", func(svc *corev1.Service) { svc.Spec.LoadBalancerIP = "198.51.100.12" }))
	s.create(service("outside", annotate(v1.AnnotationLoadBalancerIPs, "203.0.113.50")))
	s.create(service("dual", families(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol),
		annotate(v1.AnnotationLoadBalancerIPs, "198.51.100.15,2001:db8:8::5")))
	s.addrs("tabby", "198.51.100.13")
	s.addrs("metallb", "198.51.100.14")
	s.addrs("spec", "198.51.100.12")
	s.addrs("dual", "198.51.100.15", "2001:db8:8::5")
	s.event("outside", controller.ReasonFailed, "203.0.113.50", "no LoadBalancer pool")
	if got := ips(s.get("outside")); len(got) != 0 {
		t.Fatalf("a Service asking for an address outside every pool got %v", got)
	}
	s.create(service("bad", annotate(v1.AnnotationLoadBalancerIPs, "not-an-ip")))
	s.event("bad", controller.ReasonBadRequest, v1.AnnotationLoadBalancerIPs, "not-an-ip")
	// Asking for a taken address is refused, not shared.
	s.create(service("taken", port(443), annotate(v1.AnnotationLoadBalancerIPs, "198.51.100.13")))
	s.event("taken", controller.ReasonFailed, "198.51.100.13", s.ns+"/tabby")
	// A changed request moves the Service.
	svc := s.get("spec")
	svc.Spec.LoadBalancerIP = "198.51.100.9"
	if _, err := s.c.Services(s.ns).Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	s.addrs("spec", "198.51.100.9")
}

func TestManualPool(t *testing.T) {
	s := newScene(t, "lb-manual=198.51.100.16/30!manual")
	s.run(nil)
	s.create(service("plain"))
	s.event("plain", controller.ReasonFailed, "lb-manual is Manual")
	s.create(service("named", annotate(v1.AnnotationIPv4Pools, `["lb-manual"]`)))
	s.addrs("named", "198.51.100.16")
	s.create(service("asks", annotate(v1.AnnotationLoadBalancerIPs, "198.51.100.18")))
	s.addrs("asks", "198.51.100.18")
	if got := ips(s.get("plain")); len(got) != 0 {
		t.Fatalf("a Manual pool gave %v to a Service that did not name it", got)
	}
}

func TestDisabledPool(t *testing.T) {
	s := newScene(t, "lb-off=198.51.100.20/30!disabled")
	s.run(nil)
	s.create(service("web"))
	s.event("web", controller.ReasonFailed, "lb-off is disabled")
}

func TestSharing(t *testing.T) {
	s := newScene(t, "lb-share=198.51.100.24/30")
	s.run(nil)
	s.create(service("http", annotate(v1.AnnotationAllowSharedIP, "front")))
	s.addrs("http", "198.51.100.24")
	s.create(service("https", port(443), annotate(v1.AnnotationMetalLBAllowSharedIP, "front")))
	s.addrs("https", "198.51.100.24")
	// Same key, clashing port: another address.
	s.create(service("clash", annotate(v1.AnnotationAllowSharedIP, "front")))
	s.addrs("clash", "198.51.100.25")
	// Asking for the shared address with a clashing port is refused.
	s.create(service("clash2", annotate(v1.AnnotationAllowSharedIP, "front"), annotate(v1.AnnotationLoadBalancerIPs, "198.51.100.24")))
	s.event("clash2", controller.ReasonFailed, "198.51.100.24", "port TCP/80")
	// Local with another selector: refused too (MetalLB's rule).
	s.create(service("local", port(8080), annotate(v1.AnnotationAllowSharedIP, "front"), annotate(v1.AnnotationLoadBalancerIPs, "198.51.100.24"),
		func(svc *corev1.Service) { svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }))
	s.event("local", controller.ReasonFailed, "externalTrafficPolicy")
	// No key: never shared.
	s.create(service("nokey", port(9000)))
	s.addrs("nokey", "198.51.100.26")
}

func TestReleaseAndReuse(t *testing.T) {
	s := newScene(t, "lb-one=198.51.100.28/32")
	s.run(nil)
	s.create(service("a"))
	s.addrs("a", "198.51.100.28")
	s.create(service("b"))
	s.event("b", controller.ReasonFailed, "lb-one (198.51.100.28/32) is full")
	s.delete("a")
	s.addrs("b", "198.51.100.28")
	s.create(service("c"))
	s.event("c", controller.ReasonFailed, "is full")
	// Type changed away from LoadBalancer: released, its ingress cleared.
	b := s.get("b")
	b.Spec.Type = corev1.ServiceTypeClusterIP
	b.Spec.Ports[0].NodePort = 0
	b.Spec.AllocateLoadBalancerNodePorts = nil
	b.Spec.ExternalTrafficPolicy = ""
	if _, err := s.c.Services(s.ns).Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	s.addrs("c", "198.51.100.28")
	s.addrs("b")
}

func TestDualStackAllOrNothing(t *testing.T) {
	s := newScene(t, "lb-ds4=198.51.100.32/30", "lb-ds6=2001:db8:32::/128")
	s.run(nil)
	s.create(service("v6", families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol)))
	s.addrs("v6", "2001:db8:32::")
	s.create(service("dual", families(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)))
	s.event("dual", controller.ReasonFailed, "no free IPv6 address", "lb-ds6 (2001:db8:32::/128) is full")
	if got := ips(s.get("dual")); len(got) != 0 {
		t.Fatalf("a dual-stack Service with one family exhausted has %v: no partial state", got)
	}
	s.create(service("prefer", families(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)))
	got := s.anyAddr("prefer", 1)
	if got[0] != "198.51.100.32" && got[0] != "198.51.100.33" {
		t.Fatalf("PreferDualStack got %v", got)
	}
	s.delete("v6")
	if got := s.anyAddr("dual", 2); got[1] != "2001:db8:32::" || got[0] == got1(s, "prefer") {
		t.Fatalf("dual-stack Service got %v once the IPv6 address was free (prefer holds %v)", got, got1(s, "prefer"))
	}
	s.event("dual", controller.ReasonAssigned, "2001:db8:32::")
}

func TestConcurrentServicesGetDistinctAddresses(t *testing.T) {
	s := newScene(t, "lb-many=203.0.113.0/26")
	s.run(nil)
	const n = 50
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { s.create(service(fmt.Sprintf("s%02d", i))) })
	}
	wg.Wait()
	seen := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		a := s.anyAddr(name, 1)[0]
		if other, dup := seen[a]; dup {
			t.Fatalf("%s and %s both got %s", other, name, a)
		}
		seen[a] = name
	}
	t.Logf("%d Services created at once: all have distinct addresses %v after the first was created", n, time.Since(start).Round(time.Millisecond))
}

func TestRestartChangesNothing(t *testing.T) {
	s := newScene(t, "lb-restart=203.0.113.64/28")
	stop := s.run(nil)
	for i := range 5 {
		s.create(service(fmt.Sprintf("s%d", i), port(int32(80+i)), annotate(v1.AnnotationAllowSharedIP, "k")))
	}
	s.create(service("alone"))
	before := map[string]string{}
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		s.anyAddr(name, 1)
		before[name] = s.get(name).ResourceVersion
	}
	s.anyAddr("alone", 1)
	before["alone"] = s.get("alone").ResourceVersion
	stop()
	s.run(nil)
	// A new Service proves the new term has rebuilt and reconciled; nothing it hands out is taken.
	s.create(service("new"))
	got := s.anyAddr("new", 1)[0]
	for name, rv := range before {
		svc := s.get(name)
		if svc.ResourceVersion != rv {
			t.Errorf("restart rewrote %s (%v)", name, ips(svc))
		}
		if slices.Contains(ips(svc), got) {
			t.Errorf("new Service got %s, %s's", got, name)
		}
	}
}

func TestDuplicateGoesToTheOlderService(t *testing.T) {
	s := newScene(t, "lb-dup=203.0.113.80/29")
	s.run(nil)
	s.create(service("old"))
	s.addrs("old", "203.0.113.80")
	s.create(service("young", port(443)))
	s.addrs("young", "203.0.113.81")
	// A split brain or a user's edit: the younger Service claims the older one's address.
	young := s.get("young")
	young.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.80"}}
	if _, err := s.c.Services(s.ns).UpdateStatus(context.Background(), young); err != nil {
		t.Fatal(err)
	}
	s.event("young", controller.ReasonConflict, "203.0.113.80", s.ns+"/old")
	testwait.Until(t, "the younger Service to lose the duplicate", wait, func() bool {
		got := ips(s.get("young"))
		return len(got) == 1 && got[0] != "203.0.113.80"
	})
	s.addrs("old", "203.0.113.80")
}

func TestDeletedPoolKeepsItsAddresses(t *testing.T) {
	s := newScene(t, "lb-gone=203.0.113.96/31")
	s.run(nil)
	s.create(service("keeper"))
	s.addrs("keeper", "203.0.113.96")
	if err := s.c.IPPools().Delete(context.Background(), "lb-gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.event("keeper", controller.ReasonPoolDeleted, "203.0.113.96")
	s.addrs("keeper", "203.0.113.96")
	// The pool comes back: its held address goes to nobody else.
	s.pool("lb-gone=203.0.113.96/31")
	s.create(service("next"))
	s.addrs("next", "203.0.113.97")
	s.addrs("keeper", "203.0.113.96")
}

func got1(s *scene, name string) string {
	if got := ips(s.get(name)); len(got) > 0 {
		return got[0]
	}
	return ""
}
