package bird

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// serviceRanges are where a Service's addresses may be announced from, by kind: the
// BGPConfiguration's serviceClusterIPs, serviceExternalIPs and serviceLoadBalancerIPs (announced
// whole by every node, as Calico does), and the LoadBalancer pools (never announced whole: an
// address nobody holds must not draw traffic into the cluster). Each list is sorted; replaced,
// never modified.
type serviceRanges struct {
	cluster, external, loadBalancer, lbPools []netip.Prefix
}

func (r serviceRanges) equal(o serviceRanges) bool {
	return slices.Equal(r.cluster, o.cluster) && slices.Equal(r.external, o.external) &&
		slices.Equal(r.loadBalancer, o.loadBalancer) && slices.Equal(r.lbPools, o.lbPools)
}

// aggregates are the ranges every node announces whole.
func (r serviceRanges) aggregates() []netip.Prefix {
	return sortedPrefixes(slices.Concat(r.cluster, r.external, r.loadBalancer))
}

// all are every range a Service's address may lie in: the policy's service set. What lies
// inside one goes to external routers only and is learned from no one.
func (r serviceRanges) all() []netip.Prefix {
	return sortedPrefixes(slices.Concat(r.cluster, r.external, r.loadBalancer, r.lbPools))
}

// configRanges reads the BGPConfiguration's ranges (the syncer passes only validated
// configurations: an unparsable one cannot occur and is skipped) and keeps lbPools.
func configRanges(c *v1.BGPConfiguration, lbPools []netip.Prefix) serviceRanges {
	r := serviceRanges{lbPools: lbPools}
	if c == nil {
		return r
	}
	parse := func(list []v1.ServiceCIDR) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range list {
			if p, err := validation.ParseCIDR(s.CIDR); err == nil {
				out = append(out, p)
			}
		}
		return sortedPrefixes(out)
	}
	r.cluster, r.external, r.loadBalancer = parse(c.Spec.ServiceClusterIPs), parse(c.Spec.ServiceExternalIPs), parse(c.Spec.ServiceLoadBalancerIPs)
	return r
}

func sortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, netip.Prefix.Compare)
	return slices.Compact(ps)
}

func within(ranges []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(a) })
}

// Why a node announces a Service's addresses or not, as the status shows it.
const (
	reasonCluster    = "Cluster: every node"
	reasonLocal      = "Local: a ready endpoint on this node"
	reasonNoEndpoint = "Local: no ready endpoint on this node"
	reasonNoRange    = "no address in an announced range or LoadBalancer pool"
)

// servicePrefixes are the host routes (/32, /128) this node announces for s, and why.
//
// It follows the data path kube-proxy builds. With externalTrafficPolicy Cluster any node
// forwards a LoadBalancer address's traffic to any endpoint, so every node announces it (the
// ToR spreads over all of them); the cluster and external IPs are covered by their ranges,
// announced whole. With Local only a node with a ready endpoint serves external traffic (and
// keeps the client's address), so only such a node announces the Service's addresses, every
// kind, as more specific routes inside the ranges every node announces: the ToR sends the
// traffic there alone, and the route goes with the node's last endpoint.
func servicePrefixes(s model.Service, r serviceRanges) ([]netip.Prefix, string) {
	var addrs []netip.Addr
	for _, a := range s.LoadBalancerIPs {
		if within(r.loadBalancer, a) || within(r.lbPools, a) {
			addrs = append(addrs, a)
		}
	}
	if s.Local {
		for _, a := range s.ClusterIPs {
			if within(r.cluster, a) {
				addrs = append(addrs, a)
			}
		}
		for _, a := range s.ExternalIPs {
			if within(r.external, a) {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		return nil, reasonNoRange
	}
	if s.Local && !s.LocalEndpoint {
		return nil, reasonNoEndpoint
	}
	out := make([]netip.Prefix, len(addrs))
	for i, a := range addrs {
		out[i] = ipfamily.HostPrefix(a)
	}
	if s.Local {
		return sortedPrefixes(out), reasonLocal
	}
	return sortedPrefixes(out), reasonCluster
}

// announcedService is a Service as bird keeps it: the message, and what it decided.
type announcedService struct {
	svc      model.Service
	prefixes []netip.Prefix
	reason   string
}

// serviceChanged records a Service (nil: removed) and counts its host routes in and out of
// in.serviceHosts. A Service's address shared with another (a shared LoadBalancer IP) stays
// announced while either wants it.
func (in *inputs) serviceChanged(key string, s *model.Service) dirtySet {
	old, had := in.svcs[key]
	var cur announcedService
	if s != nil {
		cur.svc = *s
		cur.prefixes, cur.reason = servicePrefixes(*s, in.ranges)
		in.svcs[key] = cur
	} else {
		delete(in.svcs, key)
	}
	changed := false
	for _, p := range cur.prefixes {
		changed = in.serviceHosts.add(p) || changed
	}
	if had {
		for _, p := range old.prefixes {
			changed = in.serviceHosts.remove(p) || changed
		}
	}
	if changed {
		return dirtyPaths
	}
	return 0
}

// rangesChanged decides every Service again under new ranges.
func (in *inputs) rangesChanged(r serviceRanges) dirtySet {
	if r.equal(in.ranges) {
		return 0
	}
	aggregates, all := r.aggregates(), r.all()
	var d dirtySet
	if !slices.Equal(aggregates, in.aggregates) {
		d |= dirtyPaths
	}
	if !slices.Equal(all, in.services) {
		d |= dirtyPaths | dirtyPolicy | dirtyRoutes
	}
	in.ranges, in.aggregates, in.services = r, aggregates, all
	for key, s := range in.svcs {
		svc := s.svc
		d |= in.serviceChanged(key, &svc)
	}
	return d
}

// lbPoolCIDRs are the LoadBalancer pools' CIDRs, sorted.
func (in *inputs) lbPoolCIDRs() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(in.lbPools))
	for _, p := range in.lbPools {
		out = append(out, p)
	}
	return sortedPrefixes(out)
}

// servicesStatusLocked fills the reply's Services: those announced here, and those that would
// be with a ready endpoint here, the question an operator asks of a Local Service.
func (in *inputs) servicesStatusLocked(reply *status.PeersReply) {
	reply.ServiceRoutes = len(in.serviceHosts.list())
	keys := slices.Sorted(maps.Keys(in.svcs))
	for _, k := range keys {
		s := in.svcs[k]
		if s.reason == reasonNoRange {
			continue
		}
		if len(reply.Services) == status.MaxServicesShown {
			reply.ServicesMore++
			continue
		}
		r := status.ServiceRoutes{Service: k, Reason: s.reason}
		for _, p := range s.prefixes {
			r.Prefixes = append(r.Prefixes, p.String())
		}
		reply.Services = append(reply.Services, r)
	}
}
