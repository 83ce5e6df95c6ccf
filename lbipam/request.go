package lbipam

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Request is what one Service asks of LoadBalancer IPAM, read from the Service once (FromService).
type Request struct {
	// Key is namespace/name.
	Key string
	// Created orders Services that claim one address: the older keeps it.
	Created time.Time
	// Families are the families the Service wants, in its order (spec.ipFamilies).
	Families []ipfamily.Family
	// RequireAll: every family or none (ipFamilyPolicy RequireDualStack, or one family).
	RequireAll bool
	// Addresses asked for by annotation or spec.loadBalancerIP, at most one per family.
	Addresses []netip.Addr
	// Pools named per family (pool names or CIDRs); empty: any Automatic pool.
	Pools ipfamily.Pair[[]string]
	// SharingKey lets Services with the same key share an address; "": never shared.
	SharingKey string
	// Backend is what the endpoints of a Local Service are chosen by (its selector): two Local
	// Services share only with the same; "" for a Cluster Service.
	Backend string
	// Ports are the Service's protocol/port pairs (TCP/80).
	Ports []string
}

// ServiceOf tells whether tabby assigns the Service's addresses: type LoadBalancer, and no
// class or tabby's.
func ServiceOf(s *corev1.Service) bool {
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	return s.Spec.LoadBalancerClass == nil || *s.Spec.LoadBalancerClass == v1.LoadBalancerClass
}

// FromService reads a Service's request; a malformed annotation is an error naming it and its
// value (the request returned then still tells how the Service may share what it holds).
func FromService(s *corev1.Service) (Request, error) {
	r := Request{Key: s.Namespace + "/" + s.Name, Created: s.CreationTimestamp.Time}
	for _, f := range s.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			r.Families = append(r.Families, ipfamily.IPv4)
		case corev1.IPv6Protocol:
			r.Families = append(r.Families, ipfamily.IPv6)
		}
	}
	if len(r.Families) == 0 {
		// The API server always sets ipFamilies of a Service with a cluster IP; a Service read
		// from elsewhere defaults to IPv4.
		r.Families = []ipfamily.Family{ipfamily.IPv4}
	}
	r.RequireAll = len(r.Families) == 1 || s.Spec.IPFamilyPolicy == nil || *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack
	r.SharingKey = s.Annotations[v1.AnnotationAllowSharedIP]
	if r.SharingKey == "" {
		r.SharingKey = s.Annotations[v1.AnnotationMetalLBAllowSharedIP]
	}
	if s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		// MetalLB's rule: a Local Service's traffic goes to its own endpoints on the node it
		// arrives at; one address may announce only one set of them.
		r.Backend = "selector:" + labels.SelectorFromSet(s.Spec.Selector).String()
	}
	for _, p := range s.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		r.Ports = append(r.Ports, fmt.Sprintf("%s/%d", proto, p.Port))
	}
	var err error
	if r.Addresses, err = requestedAddresses(s); err != nil {
		return r, err
	}
	for _, fam := range ipfamily.All {
		key := v1.AnnotationIPv4Pools
		if fam == ipfamily.IPv6 {
			key = v1.AnnotationIPv6Pools
		}
		v, ok := s.Annotations[key]
		if !ok {
			continue
		}
		l, err := parseList(v)
		if err != nil || len(l) == 0 {
			return r, fmt.Errorf("annotation %s: %q is not a list of pool names or CIDRs", key, v)
		}
		r.Pools.Set(fam, l)
	}
	return r, nil
}

// requestedAddresses reads tabby's annotation, else MetalLB's, else spec.loadBalancerIP.
func requestedAddresses(s *corev1.Service) ([]netip.Addr, error) {
	key, v := v1.AnnotationLoadBalancerIPs, s.Annotations[v1.AnnotationLoadBalancerIPs]
	if v == "" {
		key, v = v1.AnnotationMetalLBLoadBalancerIPs, s.Annotations[v1.AnnotationMetalLBLoadBalancerIPs]
	}
	if v == "" {
		key, v = "spec.loadBalancerIP", s.Spec.LoadBalancerIP
	}
	if v == "" {
		return nil, nil
	}
	l, err := parseList(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a JSON list or a comma-separated list of addresses", key, v)
	}
	var out []netip.Addr
	for _, a := range l {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an IP address", key, a)
		}
		addr = addr.Unmap()
		if slices.ContainsFunc(out, func(o netip.Addr) bool { return ipfamily.OfAddr(o) == ipfamily.OfAddr(addr) }) {
			return nil, fmt.Errorf("%s: %q asks for two %s addresses: one per family at most", key, v, ipfamily.OfAddr(addr))
		}
		out = append(out, addr)
	}
	return out, nil
}

// parseList reads a JSON list of strings (Calico's form) or a comma-separated list (MetalLB's).
func parseList(v string) ([]string, error) {
	v = strings.TrimSpace(v)
	var l []string
	if strings.HasPrefix(v, "[") {
		if err := json.Unmarshal([]byte(v), &l); err != nil {
			return nil, err
		}
	} else {
		l = strings.Split(v, ",")
	}
	out := l[:0]
	for _, s := range l {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}
