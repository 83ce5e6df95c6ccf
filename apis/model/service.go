package model

import (
	"net/netip"
	"slices"
)

// Service is what the BGP agent of one node reads of a Kubernetes Service to decide which of its
// addresses that node announces: its addresses by kind, its external traffic policy, and whether
// this node has a ready endpoint of it. The node's syncer sends only Services that may be
// announced (a cluster IP, not headless, no other service proxy, no tabby.dev/advertise
// "false"), so a Service that stops being one is a ServiceRemove.
type Service struct {
	// Key is namespace/name.
	Key string
	// ClusterIPs, ExternalIPs and LoadBalancerIPs (status.loadBalancer.ingress) are sorted and
	// each listed once.
	ClusterIPs      []netip.Addr
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr
	// Local: externalTrafficPolicy Local. kube-proxy then forwards external traffic only to
	// endpoints on the node it arrives at (and keeps the client's address), so only nodes with
	// one may attract it.
	Local bool
	// LocalEndpoint: an EndpointSlice of the Service lists a ready endpoint on this node.
	LocalEndpoint bool
}

// Equal tells whether two Services are the same in everything tabby reads of them.
func (s Service) Equal(o Service) bool {
	return s.Key == o.Key && s.Local == o.Local && s.LocalEndpoint == o.LocalEndpoint &&
		slices.Equal(s.ClusterIPs, o.ClusterIPs) && slices.Equal(s.ExternalIPs, o.ExternalIPs) &&
		slices.Equal(s.LoadBalancerIPs, o.LoadBalancerIPs)
}

// ServiceUpdate: a Service that may be announced appeared, or something tabby reads of it
// changed (its addresses, its policy, whether this node has a ready endpoint of it).
type ServiceUpdate struct{ Service Service }

// ServiceRemove: the Service is gone or may no longer be announced.
type ServiceRemove struct{ Key string }

// LoadBalancerPoolUpdate: a valid IPPool whose allowedUses is LoadBalancer was created or
// changed. Such a pool is never a PoolUpdate: it holds no pod, no tunnel and no block, and the
// agents that route pods never see it.
type LoadBalancerPoolUpdate struct{ Pool Pool }

// LoadBalancerPoolRemove: the LoadBalancer pool is gone, no longer valid or no longer a
// LoadBalancer pool.
type LoadBalancerPoolRemove struct{ Name string }
