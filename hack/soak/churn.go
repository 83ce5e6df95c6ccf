package soak

import (
	"context"
	"fmt"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/hack/churn"
	"github.com/tabbynet/tabby/hack/lab"
)

// The soak's pods: a web pod on every node that only clients may reach (the standing policy),
// a base client on every node, and churned clients that come and go every round.
const (
	labelApp   = "app"
	labelRole  = "role"
	appWeb     = "soak-web"
	roleClient = "client"
	webPort    = 8080
)

// standingPolicy admits clients to the web pods: its ipset holds every client, base and
// churned, so pod churn is ipset churn.
func standingPolicy() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "soak-web", Namespace: lab.PodNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelApp: appWeb}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelRole: roleClient}}}},
			}},
		},
	}
}

// churnPolicy lives for part of a round: egress chains for every client, created and removed.
func churnPolicy(round int) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(webPort)
	tcp := corev1.ProtocolTCP
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("soak-churn-%d", round), Namespace: lab.PodNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelRole: roleClient}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: appWeb}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}

// basePods are the pods that stay for the whole soak.
func basePods(nodes []*lab.Node) []lab.PodSpec {
	var specs []lab.PodSpec
	for _, n := range nodes {
		specs = append(specs,
			lab.PodSpec{Name: n.Name + "-web", Node: n.Name, Labels: map[string]string{labelApp: appWeb}},
			lab.PodSpec{Name: n.Name + "-client", Node: n.Name, Labels: map[string]string{labelRole: roleClient}},
		)
	}
	return specs
}

const churnPrefix = "churn-"

// churnPods are round's churned clients, one per node.
func churnPods(nodes []*lab.Node, round int) []lab.PodSpec {
	var specs []lab.PodSpec
	for _, n := range nodes {
		specs = append(specs, lab.PodSpec{Name: fmt.Sprintf("%sr%d-%s", churnPrefix, round, n.Name), Node: n.Name, Labels: map[string]string{labelRole: roleClient}})
	}
	return specs
}

// churnRound replaces the previous round's churned clients with new ones while a policy is
// created and removed.
func (s *soak) churnRound(ctx context.Context, round int) error {
	pol := churnPolicy(round)
	if _, err := churn.TogglePolicy(ctx, s.lab, pol); err != nil {
		return err
	}
	if err := churn.ReplacePods(ctx, s.lab, churnPrefix, churnPods(s.lab.Nodes(), round)); err != nil {
		return err
	}
	_, err := churn.TogglePolicy(ctx, s.lab, pol)
	return err
}

// flap restarts the last node's tabby-node, by turns cleanly (SIGTERM) and by a crash
// (SIGKILL): its BGP sessions with every other node drop and come back. The other nodes' agents
// run for the whole soak, so their curves show what the flaps, the churn and the API server
// restarts leave behind.
func (s *soak) flap(ctx context.Context) (string, error) {
	nodes := s.lab.Nodes()
	n := nodes[len(nodes)-1]
	crash := s.flaps%2 == 1
	s.flaps++
	what := "restart tabby-node on " + n.Name
	if crash {
		what = "crash and start tabby-node on " + n.Name
	}
	_, err := churn.RestartAgent(ctx, n, crash, 0)
	return what, err
}

// restartAPIServer restarts kube-apiserver (same etcd): every watch of the agents and typha
// breaks and resumes.
func (s *soak) restartAPIServer(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := churn.RestartAPIServer(rctx, s.lab, syscall.SIGTERM, 0)
	return err
}
