package client

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// KubeScheme knows the Kubernetes kinds tabby reads: the core API, NetworkPolicy,
// EndpointSlice, Lease, and the network-policy-api's AdminNetworkPolicy and
// BaselineAdminNetworkPolicy (v1alpha1) and ClusterNetworkPolicy (v1beta1).
var KubeScheme = runtime.NewScheme()

func init() {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, networkingv1.AddToScheme, discoveryv1.AddToScheme, coordinationv1.AddToScheme, anpv1alpha1.Install, cnpv1beta1.Install} {
		if err := add(KubeScheme); err != nil {
			panic(err)
		}
	}
}

// Nodes is the cluster's Nodes.
func (c *Client) Nodes() Resource[*corev1.Node, *corev1.NodeList] {
	return Resource[*corev1.Node, *corev1.NodeList]{c.Core, "nodes", func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} }, "", false, c}
}

// Namespaces is the cluster's Namespaces.
func (c *Client) Namespaces() Resource[*corev1.Namespace, *corev1.NamespaceList] {
	return Resource[*corev1.Namespace, *corev1.NamespaceList]{c.Core, "namespaces", func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} }, "", false, c}
}

// Pods is the Pods of a namespace ("": every namespace).
func (c *Client) Pods(namespace string) Resource[*corev1.Pod, *corev1.PodList] {
	return Resource[*corev1.Pod, *corev1.PodList]{c.Core, "pods", func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} }, namespace, false, c}
}

// Secrets is the Secrets of a namespace.
func (c *Client) Secrets(namespace string) Resource[*corev1.Secret, *corev1.SecretList] {
	return Resource[*corev1.Secret, *corev1.SecretList]{c.Core, "secrets", func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} }, namespace, false, c}
}

// ConfigMaps is the ConfigMaps of a namespace ("": every namespace).
func (c *Client) ConfigMaps(namespace string) Resource[*corev1.ConfigMap, *corev1.ConfigMapList] {
	return Resource[*corev1.ConfigMap, *corev1.ConfigMapList]{c.Core, "configmaps", func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} }, namespace, false, c}
}

// NetworkPolicies is the NetworkPolicies of a namespace ("": every namespace).
func (c *Client) NetworkPolicies(namespace string) Resource[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList] {
	return Resource[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList]{c.Networking, "networkpolicies", func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} }, func() *networkingv1.NetworkPolicyList { return &networkingv1.NetworkPolicyList{} }, namespace, false, c}
}

// Services is the Services of a namespace ("": every namespace).
func (c *Client) Services(namespace string) Resource[*corev1.Service, *corev1.ServiceList] {
	return Resource[*corev1.Service, *corev1.ServiceList]{c.Core, "services", func() *corev1.Service { return &corev1.Service{} }, func() *corev1.ServiceList { return &corev1.ServiceList{} }, namespace, false, c}
}

// EndpointSlices is the EndpointSlices of a namespace ("": every namespace).
func (c *Client) EndpointSlices(namespace string) Resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList] {
	return Resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList]{c.Discovery, "endpointslices", func() *discoveryv1.EndpointSlice { return &discoveryv1.EndpointSlice{} }, func() *discoveryv1.EndpointSliceList { return &discoveryv1.EndpointSliceList{} }, namespace, false, c}
}

// AdminNetworkPolicies is the cluster's AdminNetworkPolicies (policy.networking.k8s.io/v1alpha1).
func (c *Client) AdminNetworkPolicies() Resource[*anpv1alpha1.AdminNetworkPolicy, *anpv1alpha1.AdminNetworkPolicyList] {
	return Resource[*anpv1alpha1.AdminNetworkPolicy, *anpv1alpha1.AdminNetworkPolicyList]{c.Policy, "adminnetworkpolicies", func() *anpv1alpha1.AdminNetworkPolicy { return &anpv1alpha1.AdminNetworkPolicy{} }, func() *anpv1alpha1.AdminNetworkPolicyList { return &anpv1alpha1.AdminNetworkPolicyList{} }, "", true, c}
}

// BaselineAdminNetworkPolicies is the cluster's BaselineAdminNetworkPolicy (a singleton named
// default).
func (c *Client) BaselineAdminNetworkPolicies() Resource[*anpv1alpha1.BaselineAdminNetworkPolicy, *anpv1alpha1.BaselineAdminNetworkPolicyList] {
	return Resource[*anpv1alpha1.BaselineAdminNetworkPolicy, *anpv1alpha1.BaselineAdminNetworkPolicyList]{c.Policy, "baselineadminnetworkpolicies", func() *anpv1alpha1.BaselineAdminNetworkPolicy { return &anpv1alpha1.BaselineAdminNetworkPolicy{} }, func() *anpv1alpha1.BaselineAdminNetworkPolicyList {
		return &anpv1alpha1.BaselineAdminNetworkPolicyList{}
	}, "", true, c}
}

// ClusterNetworkPolicies is the cluster's ClusterNetworkPolicies
// (policy.networking.k8s.io/v1beta1), the network-policy-api's successor of both.
func (c *Client) ClusterNetworkPolicies() Resource[*cnpv1beta1.ClusterNetworkPolicy, *cnpv1beta1.ClusterNetworkPolicyList] {
	return Resource[*cnpv1beta1.ClusterNetworkPolicy, *cnpv1beta1.ClusterNetworkPolicyList]{c.PolicyBeta, "clusternetworkpolicies", func() *cnpv1beta1.ClusterNetworkPolicy { return &cnpv1beta1.ClusterNetworkPolicy{} }, func() *cnpv1beta1.ClusterNetworkPolicyList { return &cnpv1beta1.ClusterNetworkPolicyList{} }, "", true, c}
}
