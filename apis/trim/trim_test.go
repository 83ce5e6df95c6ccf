package trim

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
