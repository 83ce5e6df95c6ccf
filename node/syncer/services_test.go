package syncer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
)

// serviceWorld adds to streamWorld a LoadBalancer pool and Services: web (type LoadBalancer,
// externalTrafficPolicy Local, a ready endpoint on n0 and one on n1), api (dual-stack, two
// external addresses, endpoints on n1 alone) and a headless one, never announced.
func serviceWorld(t *testing.T, s *Syncer) {
	t.Helper()
	s.put(t, lbPool("lb", "1"))
	web := testService("web", "1", corev1.ServiceTypeLoadBalancer, "10.96.0.10")
	web.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	web.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}
	s.put(t, web)
	s.put(t, testSlice("web-a", "web", "1", endpoint("n0", ptr(true)), endpoint("n1", nil)))
	api := testService("api", "1", corev1.ServiceTypeClusterIP, "10.96.0.11", "fd00:10:96::b")
	api.Spec.ExternalIPs = []string{"203.0.113.21", "198.51.100.21"}
	s.put(t, api)
	s.put(t, testSlice("api-a", "api", "1", endpoint("n1", ptr(true))))
	s.put(t, testService("headless", "1", corev1.ServiceTypeClusterIP, corev1.ClusterIPNone))
}

func lbPool(name, rv string) *v1.IPPool {
	return &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv},
		Spec: v1.IPPoolSpec{CIDR: "203.0.113.0/24", AllowedUses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}}
}

func testService(name, rv string, typ corev1.ServiceType, clusterIPs ...string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, ResourceVersion: rv},
		Spec: corev1.ServiceSpec{Type: typ, ClusterIP: clusterIPs[0], ClusterIPs: clusterIPs}}
}

func testSlice(name, service, rv string, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, ResourceVersion: rv,
		Labels: map[string]string{discoveryv1.LabelServiceName: service}}, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: endpoints}
}

func endpoint(node string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{"10.244.0.5"}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

// randomServiceChange changes a Service, an EndpointSlice or a pool's uses, as version rv: a
// Service's type, addresses (some that do not parse, some twice), policy, advertise opt-out and
// proxy label; a slice's endpoints moving between nodes, turning ready and unready, the slice
// moving to another Service or to none; a pool turning from pods' to Services' and back.
func randomServiceChange(t *testing.T, s *Syncer, rng *rand.Rand, version string) {
	t.Helper()
	switch rng.IntN(5) {
	case 0, 1:
		name := []string{"web", "api", "headless", "ext", "new"}[rng.IntN(5)]
		old := get[*corev1.Service](s.services, "apps/"+name)
		if old == nil {
			s.put(t, testService(name, version, corev1.ServiceTypeClusterIP, []string{"10.96.0.12", corev1.ClusterIPNone}[rng.IntN(2)]))
			return
		}
		svc := old.DeepCopy()
		svc.ResourceVersion = version
		switch rng.IntN(10) {
		case 0:
			s.remove(t, "services", "apps/"+name)
			return
		case 1:
			svc.Spec.Type = []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName}[rng.IntN(3)]
		case 2:
			svc.Status.LoadBalancer.Ingress = [][]corev1.LoadBalancerIngress{nil, {{IP: "203.0.113.10"}},
				{{IP: "2001:db8::10"}, {IP: "203.0.113.11"}, {IP: "203.0.113.11"}}, {{Hostname: "lb.example"}}, {{IP: "not-an-ip"}}}[rng.IntN(5)]
		case 3:
			svc.Spec.ExternalTrafficPolicy = []corev1.ServiceExternalTrafficPolicy{"", corev1.ServiceExternalTrafficPolicyLocal, corev1.ServiceExternalTrafficPolicyCluster}[rng.IntN(3)]
		case 4:
			svc.Annotations = []map[string]string{nil, {v1.AnnotationAdvertise: "false"}, {v1.AnnotationAdvertise: "true"}}[rng.IntN(3)]
		case 5:
			svc.Labels = []map[string]string{nil, {v1.LabelServiceProxyName: "other"}, {"app": "x"}}[rng.IntN(3)]
		case 6:
			svc.Spec.ExternalIPs = [][]string{nil, {"203.0.113.21"}, {"203.0.113.22", "bad", "203.0.113.21", "203.0.113.22"}}[rng.IntN(3)]
		case 7:
			svc.Spec.ClusterIPs = [][]string{{"10.96.0.12"}, {corev1.ClusterIPNone}, {"fd00:10:96::c", "10.96.0.12"}, nil}[rng.IntN(4)]
			if len(svc.Spec.ClusterIPs) > 0 {
				svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
			}
		case 8: // nothing tabby reads
			svc.Spec.Selector = map[string]string{"v": version}
		}
		s.put(t, svc)
	case 2, 3:
		name, service := []string{"web-a", "web-b", "api-a", "orphan"}[rng.IntN(4)], []string{"web", "api", "new"}[rng.IntN(3)]
		old := get[*discoveryv1.EndpointSlice](s.slices, "apps/"+name)
		ready := []*bool{nil, ptr(true), ptr(false)}
		if old == nil {
			s.put(t, testSlice(name, service, version, endpoint(fmt.Sprintf("n%d", rng.IntN(3)), ready[rng.IntN(3)])))
			return
		}
		sl := old.DeepCopy()
		sl.ResourceVersion = version
		switch rng.IntN(8) {
		case 0:
			s.remove(t, "endpointslices", "apps/"+name)
			return
		case 1: // an endpoint moves to another node
			if len(sl.Endpoints) > 0 {
				sl.Endpoints[rng.IntN(len(sl.Endpoints))].NodeName = ptr(fmt.Sprintf("n%d", rng.IntN(3)))
			}
		case 2: // an endpoint turns ready, unready, unknown
			if len(sl.Endpoints) > 0 {
				sl.Endpoints[rng.IntN(len(sl.Endpoints))].Conditions.Ready = ready[rng.IntN(3)]
			}
		case 3:
			sl.Endpoints = append(sl.Endpoints, endpoint(fmt.Sprintf("n%d", rng.IntN(3)), ready[rng.IntN(3)]))
		case 4:
			sl.Endpoints = nil
		case 5: // the slice is another Service's, or none's
			sl.Labels = []map[string]string{{discoveryv1.LabelServiceName: service}, nil}[rng.IntN(2)]
		case 6: // an endpoint without a node
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.6"}})
		case 7: // nothing tabby reads: an address
			for i := range sl.Endpoints {
				sl.Endpoints[i].Addresses = []string{fmt.Sprintf("10.244.0.%d", rng.IntN(250)+1)}
			}
		}
		s.put(t, sl)
	case 4: // a pool's uses flip between the pods' and the Services'
		name := []string{"v4", "v6", "extra", "lb"}[rng.IntN(4)]
		p := get[*v1.IPPool](s.pools, name)
		if p == nil {
			s.put(t, lbPool(name, version))
			return
		}
		p = p.DeepCopy()
		p.ResourceVersion = version
		if slices.Contains(p.Spec.AllowedUses, v1.IPPoolUseLoadBalancer) {
			p.Spec.AllowedUses = [][]v1.IPPoolUse{nil, {v1.IPPoolUseWorkload}}[rng.IntN(2)]
		} else {
			// With IPIP or VXLAN on it is invalid: the pool goes.
			p.Spec.AllowedUses = []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}
		}
		s.put(t, p)
	}
}

// The first pass sends the LoadBalancer pool after the pod pools, never as a PoolUpdate, and the
// announceable Services after the peers, before InSync, each as this node sees it.
func TestStreamServicesFirstPass(t *testing.T) {
	var logs bytes.Buffer
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnUpdate: func([]any) {}})
	streamWorld(t, s)
	serviceWorld(t, s)
	api := get[*corev1.Service](s.services, "apps/api").DeepCopy()
	api.Spec.ExternalIPs = append(api.Spec.ExternalIPs, "203.0.113.999", "198.51.100.21")
	s.put(t, api)
	msgs, _ := s.pass()
	st := newStreamState()
	st.apply(t, msgs)
	st.check(t, s, "first pass")
	var services []any
	for i, m := range msgs {
		switch m := m.(type) {
		case model.PoolUpdate:
			if m.Pool.Name == "lb" {
				t.Fatal("the LoadBalancer pool sent as a pod pool")
			}
		case model.LoadBalancerPoolUpdate:
			if _, ok := msgs[i-1].(model.PoolUpdate); !ok || m.Pool.Name != "lb" {
				t.Fatalf("LoadBalancer pool %v, message %d: want lb right after the pools", m.Pool.Name, i)
			}
		case model.ServiceUpdate:
			services = append(services, m)
		}
	}
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	want := []any{
		model.ServiceUpdate{Service: model.Service{Key: "apps/api", ClusterIPs: addrs("10.96.0.11", "fd00:10:96::b"), ExternalIPs: addrs("198.51.100.21", "203.0.113.21")}},
		model.ServiceUpdate{Service: model.Service{Key: "apps/web", ClusterIPs: addrs("10.96.0.10"), LoadBalancerIPs: addrs("203.0.113.10"), Local: true, LocalEndpoint: true}},
	}
	if fmt.Sprint(services) != fmt.Sprint(want) {
		t.Fatalf("the first pass sent Services\n %v\nwant\n %v", services, want)
	}
	if !strings.Contains(logs.String(), "spec.externalIPs[2]") || !strings.Contains(logs.String(), "203.0.113.999") {
		t.Fatalf("the address that does not parse is not logged with its field: %s", logs.String())
	}
}

// After the first pass: an EndpointSlice change on another node sends nothing and costs no
// pass; this node's endpoint turning unready, then ready, sends the Service; the opt-out removes
// it and lifting it sends it back; a pod pool that becomes a LoadBalancer pool is one kind's
// removal and the other's update in the same pass.
func TestStreamServicesChanges(t *testing.T) {
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
	streamWorld(t, s)
	serviceWorld(t, s)
	st := newStreamState()
	msgs, _ := s.pass()
	st.apply(t, msgs)
	step := func(what string, want ...any) {
		t.Helper()
		msgs, _ := s.pass()
		st.apply(t, msgs)
		st.check(t, s, what)
		if len(want) == 1 && want[0] == nil {
			want = nil
		}
		if fmt.Sprint(msgs) != fmt.Sprint(want) {
			t.Fatalf("%s: sent %v, want %v", what, msgs, want)
		}
	}
	web := st.services["apps/web"]

	// n1's endpoint of web unready, n1's endpoint of api gone: nothing for n0, not even a pass.
	sl := get[*discoveryv1.EndpointSlice](s.slices, "apps/web-a").DeepCopy()
	sl.ResourceVersion = "2"
	sl.Endpoints[1].Conditions.Ready = ptr(false)
	s.put(t, sl)
	sl2 := get[*discoveryv1.EndpointSlice](s.slices, "apps/api-a").DeepCopy()
	sl2.ResourceVersion = "2"
	sl2.Endpoints = nil
	s.put(t, sl2)
	s.mu.Lock()
	idle := s.dirty.empty()
	s.mu.Unlock()
	if !idle {
		t.Fatalf("endpoints on other nodes changed: the syncer has work %+v", s.dirty)
	}
	step("endpoints elsewhere", nil)

	sl = sl.DeepCopy()
	sl.ResourceVersion = "3"
	sl.Endpoints[0].Conditions.Ready = ptr(false)
	s.put(t, sl)
	unready := web
	unready.LocalEndpoint = false
	step("this node's endpoint unready", model.ServiceUpdate{Service: unready})

	sl = sl.DeepCopy()
	sl.ResourceVersion = "4"
	sl.Endpoints[1].NodeName = ptr("n0")
	sl.Endpoints[1].Conditions.Ready = nil
	s.put(t, sl)
	step("an endpoint of unknown readiness moved here", model.ServiceUpdate{Service: web})

	svc := get[*corev1.Service](s.services, "apps/web").DeepCopy()
	svc.ResourceVersion = "2"
	svc.Annotations = map[string]string{v1.AnnotationAdvertise: "false"}
	s.put(t, svc)
	step("advertise false", model.ServiceRemove{Key: "apps/web"})
	svc = svc.DeepCopy()
	svc.ResourceVersion = "3"
	svc.Annotations = nil
	s.put(t, svc)
	step("advertise back", model.ServiceUpdate{Service: web})

	pod := st.pools["v6"]
	p := get[*v1.IPPool](s.pools, "v6").DeepCopy()
	p.ResourceVersion = "2"
	p.Spec.AllowedUses = []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}
	s.put(t, p)
	lb, _ := parsePool(p, discard)
	step("a pod pool turned LoadBalancer", model.PoolRemove{Name: "v6"}, model.LoadBalancerPoolUpdate{Pool: lb})
	p = p.DeepCopy()
	p.ResourceVersion = "3"
	p.Spec.AllowedUses = nil
	s.put(t, p)
	step("and back", model.PoolUpdate{Pool: pod}, model.LoadBalancerPoolRemove{Name: "v6"})
}

// Against a real API server: a Service of type LoadBalancer with externalTrafficPolicy Local, its
// load balancer's address in its status and a ready endpoint on this node, reaches the stream as
// one ServiceUpdate with all of that; an EndpointSlice change on another node sends nothing (the
// next pass sends only what came after it); this node's endpoint turning unready sends the Service
// again without it.
func TestSyncerSendsServices(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const node, ns = "svc-n0", "shop"
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	passes := make(chan []any, 100)
	m := NewMetrics(prometheus.NewRegistry())
	s := New(env.Client, Config{NodeName: node, Metrics: m, OnUpdate: func(msgs []any) { passes <- msgs }})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() { stop(); <-done }()
	next := func(what string) []any {
		t.Helper()
		select {
		case msgs := <-passes:
			return msgs
		case <-ctx.Done():
			t.Fatalf("no pass sent %s", what)
			return nil
		}
	}
	first := next("the first pass")
	if !slices.ContainsFunc(first, func(m any) bool { u, ok := m.(model.ServiceUpdate); return ok && u.Service.Key == "default/kubernetes" }) {
		t.Fatalf("the first pass sent %v, want the kubernetes Service among them", first)
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	svc, err := env.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}
	if _, err := env.Kube.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := testSlice("web-1", "web", "", endpoint(node, ptr(true)), endpoint("svc-n1", ptr(true)))
	slice.Namespace = ns
	if slice, err = env.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := model.Service{Key: ns + "/web", ClusterIPs: []netip.Addr{netip.MustParseAddr(svc.Spec.ClusterIP)},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("203.0.113.10")}, Local: true, LocalEndpoint: true}
	// The three writes may take up to three passes; the Service's last update is all of them.
	for announced := false; !announced; {
		msgs := next("the Service with its address and this node's endpoint")
		u, ok := msgs[0].(model.ServiceUpdate)
		if len(msgs) != 1 || !ok {
			t.Fatalf("sent %v, want the Service alone", msgs)
		}
		announced = u.Service.Equal(want)
	}

	// Another node's endpoint unready, then gone: seen, and nothing sent.
	seen := testutil.ToFloat64(m.events.WithLabelValues("endpointslices"))
	slice.Endpoints[1].Conditions.Ready = ptr(false)
	if slice, err = env.Kube.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = slice.Endpoints[:1]
	if slice, err = env.Kube.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "both EndpointSlice events", 30*time.Second, func() bool {
		return testutil.ToFloat64(m.events.WithLabelValues("endpointslices")) >= seen+2
	})
	// A marker after them: the next pass sends it alone.
	marker := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marker"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err = env.Kube.CoreV1().Services(ns).Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := next("the marker")
	if u, ok := msgs[0].(model.ServiceUpdate); len(msgs) != 1 || !ok || u.Service.Key != ns+"/marker" {
		t.Fatalf("after endpoints changed on another node, sent %v, want the marker Service alone", msgs)
	}

	// This node's endpoint unready: the Service without it.
	slice.Endpoints[0].Conditions.Ready = ptr(false)
	if _, err = env.Kube.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want.LocalEndpoint = false
	if msgs := next("the Service without this node's endpoint"); fmt.Sprint(msgs) != fmt.Sprint([]any{model.ServiceUpdate{Service: want}}) {
		t.Fatalf("this node's endpoint unready: sent %v, want %v", msgs, model.ServiceUpdate{Service: want})
	}
}
