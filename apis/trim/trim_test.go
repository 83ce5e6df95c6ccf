package trim

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Node informer keeps what tabby reads (addresses, readiness, labels, annotations, spec) and
// drops the rest of the kubelet's status.
func TestTrimNode(t *testing.T) {
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.10"}}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n0", Labels: map[string]string{"rack": "r1"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24"},
		Status: corev1.NodeStatus{
			Addresses: addrs,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()},
			},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			NodeInfo: corev1.NodeSystemInfo{KernelVersion: "6.1.0"},
			Images:   []corev1.ContainerImage{{Names: []string{"pause"}}},
		},
	}
	out, err := Object(n)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	want := corev1.NodeStatus{Addresses: addrs, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	if !reflect.DeepEqual(got.Status, want) {
		t.Errorf("status %+v, want %+v", got.Status, want)
	}
	if got.ManagedFields != nil || got.Labels["rack"] != "r1" || got.Spec.PodCIDR != "10.244.0.0/24" {
		t.Errorf("metadata or spec: %+v", got)
	}
}

// A Service keeps what the BGP agents read (labels, annotations but kubectl's copy, type,
// addresses, policy, its load balancer's addresses); an EndpointSlice its Service and each
// endpoint's node and readiness.
func TestTrimServiceAndEndpointSlice(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", ResourceVersion: "7", Labels: map[string]string{"app": "web"},
			Annotations:   map[string]string{"tabby.dev/advertise": "false", corev1.LastAppliedConfigAnnotation: "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			ExternalIPs: []string{"203.0.113.5"}, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}}},
	}
	out, err := Object(svc.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Service)
	want := svc.DeepCopy()
	want.ManagedFields, want.Spec.Selector, want.Spec.Ports = nil, nil, nil
	delete(want.Annotations, corev1.LastAppliedConfigAnnotation)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Service trimmed to\n %+v\nwant\n %+v", got, want)
	}

	node, ready := "n1", false
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-x1", ResourceVersion: "8",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io", "app": "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-1"}}},
	}
	out, err = Object(slice)
	if err != nil {
		t.Fatal(err)
	}
	gotSlice := out.(*discoveryv1.EndpointSlice)
	wantSlice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "apps", Name: "web-x1", ResourceVersion: "8", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	if !reflect.DeepEqual(gotSlice, wantSlice) {
		t.Errorf("EndpointSlice trimmed to\n %+v\nwant\n %+v", gotSlice, wantSlice)
	}
}
