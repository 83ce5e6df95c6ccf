package syncer

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/felix/policy"
)

// PolicyInput is the calculator's input for node as tabby-node on that node reaches it, from the
// same API objects: the pods' addresses and the node's endpoints (its pods behind their host
// veths) from the IPAM blocks, as Build derives them, the rest from the Pods (PolicyPod),
// Namespaces and NetworkPolicies. tabbyctl uses it to show and check what a node enforces.
func PolicyInput(node string, blocks []*v1.IPAMBlock, pods []*corev1.Pod, namespaces []*corev1.Namespace, policies []*networkingv1.NetworkPolicy) policy.Input {
	s := Build(Inputs{NodeName: node, Blocks: blocks}, slog.New(slog.DiscardHandler))
	var endpoints []policy.Endpoint
	for _, w := range s.Workloads {
		endpoints = append(endpoints, policy.Endpoint{Interface: w.Interface, Pod: w.Pod})
	}
	in := policy.Input{
		Pods:       make(map[policy.Key]*policy.Pod, len(pods)),
		Namespaces: make(map[string]*policy.Namespace, len(namespaces)),
		Policies:   make(map[policy.Key]*networkingv1.NetworkPolicy, len(policies)),
		Endpoints:  endpoints,
	}
	for _, p := range pods {
		pp := PolicyPod(p)
		in.Pods[pp.Key] = &pp
	}
	in.IPs = s.PodIPs
	for _, ns := range namespaces {
		in.Namespaces[ns.Name] = &policy.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	for _, np := range policies {
		in.Policies[policy.Key{Namespace: np.Namespace, Name: np.Name}] = np
	}
	return in
}

// ReadPolicyInput lists the objects PolicyInput reads from the API server and builds it.
func ReadPolicyInput(ctx context.Context, c *client.Client, node string) (policy.Input, error) {
	blocks, err := c.IPAMBlocks().List(ctx, metav1.ListOptions{})
	if err != nil {
		return policy.Input{}, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	pods, err := c.Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return policy.Input{}, fmt.Errorf("list Pods: %w", err)
	}
	nss, err := c.Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return policy.Input{}, fmt.Errorf("list Namespaces: %w", err)
	}
	nps, err := c.NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return policy.Input{}, fmt.Errorf("list NetworkPolicies: %w", err)
	}
	// A cluster whose network-policy-api CRDs are not installed has no admin policy.
	anps, err := c.AdminNetworkPolicies().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		anps, err = &anpv1alpha1.AdminNetworkPolicyList{}, nil
	}
	if err != nil {
		return policy.Input{}, fmt.Errorf("list AdminNetworkPolicies: %w", err)
	}
	banps, err := c.BaselineAdminNetworkPolicies().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		banps, err = &anpv1alpha1.BaselineAdminNetworkPolicyList{}, nil
	}
	if err != nil {
		return policy.Input{}, fmt.Errorf("list BaselineAdminNetworkPolicies: %w", err)
	}
	cnps, err := c.ClusterNetworkPolicies().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		cnps, err = &cnpv1beta1.ClusterNetworkPolicyList{}, nil
	}
	if err != nil {
		return policy.Input{}, fmt.Errorf("list ClusterNetworkPolicies: %w", err)
	}
	nodes, err := c.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return policy.Input{}, fmt.Errorf("list Nodes: %w", err)
	}
	in := PolicyInput(node, pointers(blocks.Items), pointers(pods.Items), pointers(nss.Items), pointers(nps.Items))
	AddAdminInput(&in, pointers(anps.Items), pointers(banps.Items), pointers(cnps.Items), pointers(nodes.Items))
	return in, nil
}

// AddAdminInput adds the admin policies and the nodes (for their nodes peers) to in, parsed as
// tabby-node parses them.
func AddAdminInput(in *policy.Input, anps []*anpv1alpha1.AdminNetworkPolicy, banps []*anpv1alpha1.BaselineAdminNetworkPolicy, cnps []*cnpv1beta1.ClusterNetworkPolicy, nodes []*corev1.Node) {
	in.Admin = make(map[policy.AdminKey]*policy.AdminPolicy, len(anps)+len(banps)+len(cnps))
	for _, o := range anps {
		p := policy.FromANP(o)
		in.Admin[p.Key()] = p
	}
	for _, o := range banps {
		p := policy.FromBANP(o)
		in.Admin[p.Key()] = p
	}
	for _, o := range cnps {
		p := policy.FromCNP(o)
		in.Admin[p.Key()] = p
	}
	in.Nodes = make(map[string]*policy.Node, len(nodes))
	for _, n := range nodes {
		// A node whose tabby annotations are invalid keeps its labels and InternalIPs, all a
		// nodes peer reads; tabby-node reports the annotations.
		mn, _ := validation.ParseNode(n)
		in.Nodes[n.Name] = policy.NodeOf(mn)
	}
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
