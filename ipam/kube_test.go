package ipam_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/ipam"
)

// A Node is NotReady when its Ready condition is False or Unknown; without conditions (no
// kubelet, as in the lab) it counts as ready.
func TestNodeReadiness(t *testing.T) {
	for _, tc := range []struct {
		conds    []corev1.NodeCondition
		notReady bool
	}{
		{nil, false},
		{[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, false},
		{[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}, true},
		{[]corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}, true},
	} {
		n := &corev1.Node{Status: corev1.NodeStatus{Conditions: tc.conds}}
		if got := ipam.NodeOf(n).NotReady; got != tc.notReady {
			t.Errorf("conditions %+v: NotReady %v, want %v", tc.conds, got, tc.notReady)
		}
	}
}
