// Package trim cuts the objects tabby-node caches down to what it reads. The agent's informers
// trim what they store, and tabby-typha trims what it sends: an agent then decodes a few hundred
// bytes a pod, not the kilobytes of its spec and status.
package trim

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Object is a cache.TransformFunc: obj keeps what tabby-node reads of it. Objects are trimmed in
// place (an informer's are freshly decoded), except a Pod, which is rebuilt.
func Object(obj any) (any, error) {
	if m, ok := obj.(interface {
		SetManagedFields([]metav1.ManagedFieldsEntry)
	}); ok {
		m.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Node:
		// tabby reads a Node's name, labels, annotations, addresses and readiness; the rest of
		// a kubelet's status is a kilobyte or more a node, a megabyte or more per agent at 1,000.
		o.Status = corev1.NodeStatus{Addresses: o.Status.Addresses, Conditions: o.Status.Conditions}
		// Readiness tells the IPAM garbage collector which nodes run (Nodes).
		var ready []corev1.NodeCondition
		for _, c := range o.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = append(ready, corev1.NodeCondition{Type: c.Type, Status: c.Status})
			}
		}
		o.Status.Conditions = ready
	case *corev1.Pod:
		return Pod(o), nil
	case *networkingv1.NetworkPolicy:
		// kubectl apply's last-applied-configuration is a second copy of the policy.
		o.Annotations = nil
	case *corev1.Service:
		return Service(o), nil
	case *discoveryv1.EndpointSlice:
		return EndpointSlice(o), nil
	case *anpv1alpha1.AdminNetworkPolicy:
		o.Annotations, o.Status = nil, anpv1alpha1.AdminNetworkPolicyStatus{}
	case *anpv1alpha1.BaselineAdminNetworkPolicy:
		o.Annotations, o.Status = nil, anpv1alpha1.BaselineAdminNetworkPolicyStatus{}
	case *cnpv1beta1.ClusterNetworkPolicy:
		o.Annotations, o.Status = nil, cnpv1beta1.ClusterNetworkPolicyStatus{}
	}
	return obj, nil
}

// Service is what the BGP agents read of a Service, cluster-wide: its labels and annotations
// (kubectl's second copy of the object aside), its type, addresses and traffic policy, and the
// addresses its load balancer was given; its ports and selector are kube-proxy's business.
func Service(s *corev1.Service) *corev1.Service {
	out := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion, Labels: s.Labels, Annotations: s.Annotations},
		Spec: corev1.ServiceSpec{Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs, ExternalIPs: s.Spec.ExternalIPs,
			ExternalTrafficPolicy: s.Spec.ExternalTrafficPolicy, LoadBalancerClass: s.Spec.LoadBalancerClass,
			IPFamilies: s.Spec.IPFamilies, IPFamilyPolicy: s.Spec.IPFamilyPolicy},
		Status: corev1.ServiceStatus{LoadBalancer: s.Status.LoadBalancer},
	}
	if _, ok := s.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		out.Annotations = make(map[string]string, len(s.Annotations)-1)
		for k, v := range s.Annotations {
			if k != corev1.LastAppliedConfigAnnotation {
				out.Annotations[k] = v
			}
		}
	}
	return out
}

// EndpointSlice is what the BGP agents read of an EndpointSlice: its Service and, of each
// endpoint, its node and readiness. The addresses, ports, zones and targets are most of a slice
// of a hundred endpoints, and each agent caches every slice of the cluster.
func EndpointSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		AddressType: s.AddressType,
	}
	if svc, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, len(s.Endpoints))
		for i, e := range s.Endpoints {
			out.Endpoints[i] = discoveryv1.Endpoint{NodeName: e.NodeName, Conditions: discoveryv1.EndpointConditions{Ready: e.Conditions.Ready}}
		}
	}
	return out
}

// Pod is what NetworkPolicy reads of a pod cluster-wide: its name, labels, node, host network
// and named ports.
func Pod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion, Labels: p.Labels},
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
	}
	for _, c := range p.Spec.Containers {
		if len(c.Ports) > 0 {
			out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	return out
}
