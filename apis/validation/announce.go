package validation

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// AnnouncedService is what the BGP agents read of a Service, and whether it may be announced at
// all: it has a cluster IP (not headless, not ExternalName), kube-proxy forwards its traffic (no
// service-proxy-name label) and it is not kept out of BGP (tabby.dev/advertise "false").
// LocalEndpoint is left false: only the caller knows its node and the Service's EndpointSlices.
// An address that does not parse is left out and reported with its field; the others stand.
func AnnouncedService(svc *corev1.Service) (model.Service, bool, field.ErrorList) {
	if !announceable(svc) {
		return model.Service{}, false, nil
	}
	spec := field.NewPath("spec")
	out := model.Service{Key: svc.Namespace + "/" + svc.Name, Local: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal}
	var errs field.ErrorList
	clusterIPs, path := svc.Spec.ClusterIPs, spec.Child("clusterIPs")
	if len(clusterIPs) == 0 {
		clusterIPs, path = []string{svc.Spec.ClusterIP}, spec.Child("clusterIP")
	}
	out.ClusterIPs = serviceAddrs(path, clusterIPs, &errs)
	out.ExternalIPs = serviceAddrs(spec.Child("externalIPs"), svc.Spec.ExternalIPs, &errs)
	ingress := field.NewPath("status", "loadBalancer", "ingress")
	for i, in := range svc.Status.LoadBalancer.Ingress {
		// An ingress by hostname alone is another load balancer's, not an address to announce;
		// a Service that is no longer of type LoadBalancer has none, whatever its status still
		// says.
		if in.IP == "" || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if a, ok := serviceAddr(ingress.Index(i).Child("ip"), in.IP, &errs); ok {
			out.LoadBalancerIPs = append(out.LoadBalancerIPs, a)
		}
	}
	out.LoadBalancerIPs = sortedAddrs(out.LoadBalancerIPs)
	return out, true, errs
}

// announceable: the Service has a cluster IP, kube-proxy's, and is not kept out of BGP.
func announceable(svc *corev1.Service) bool {
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName,
		svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) == 0,
		svc.Spec.ClusterIP == corev1.ClusterIPNone:
		return false
	}
	if _, ok := svc.Labels[v1.LabelServiceProxyName]; ok {
		return false
	}
	return svc.Annotations[v1.AnnotationAdvertise] != "false"
}

// serviceAddrs parses addrs, sorted and each once; one that does not parse is reported at
// path[i] and left out.
func serviceAddrs(path *field.Path, addrs []string, errs *field.ErrorList) []netip.Addr {
	var out []netip.Addr
	for i, s := range addrs {
		if a, ok := serviceAddr(path.Index(i), s, errs); ok {
			out = append(out, a)
		}
	}
	return sortedAddrs(out)
}

func serviceAddr(path *field.Path, s string, errs *field.ErrorList) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		*errs = append(*errs, field.Invalid(path, s, "not an IP address"))
		return netip.Addr{}, false
	}
	return a, true
}

func sortedAddrs(addrs []netip.Addr) []netip.Addr {
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs)
}
