// Package validation checks tabby objects without side effects. The API server enforces the same
// rules through the CRD schema (OpenAPI + CEL in apis/v1); this package serves the CLI, which
// validates before any write, and the agents, which refuse to act on an object the schema could
// not catch (a selector's syntax, for one). One table of objects (cases.go) runs through both,
// the real API server's in apiserver_test.go, so the two cannot drift apart; hack/crdschema
// evaluates the CRDs' schema in-process on that table and on generated IPPools and BGPPeers.
package validation

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/selector"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// ParseCIDR parses a prefix in canonical form (no host bits set), of either family: the one
// check of "a CIDR as tabby stores it" (pools, blocks, affinities, service CIDRs).
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR")
	}
	if p.Addr().Is4In6() {
		// As the API server's cidr(): a mapped prefix would be an IPv4 range written as IPv6.
		return netip.Prefix{}, fmt.Errorf("is an IPv4-mapped IPv6 prefix: write the IPv4 CIDR")
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("has host bits set (want %s)", p.Masked())
	}
	return p, nil
}

// ParsePeerIP parses BGPPeer.peerIP: an IPv4 or IPv6 address with an optional port (default
// 179): 198.51.100.1, 198.51.100.1:1179, 2001:db8::1 or [2001:db8::1]:1179. A link-local IPv6
// address is refused: a session to it needs an interface, which a BGPPeer does not name.
func ParsePeerIP(s string) (netip.Addr, uint16, error) {
	const form = "not an IP address with an optional port (198.51.100.1:1179, [2001:db8::1]:1179)"
	host, portStr, hasPort := s, "", false
	if rest, ok := strings.CutPrefix(s, "["); ok {
		if host, portStr, hasPort = strings.Cut(rest, "]:"); !hasPort {
			return netip.Addr{}, 0, fmt.Errorf("%s", form)
		}
	} else if strings.Count(s, ":") == 1 {
		host, portStr, hasPort = strings.Cut(s, ":")
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || addr.Zone() != "" || addr.Is4In6() || (hasPort && addr.Is4() == strings.HasPrefix(s, "[")) {
		return netip.Addr{}, 0, fmt.Errorf("%s", form)
	}
	if addr.Is6() && addr.IsLinkLocalUnicast() {
		return netip.Addr{}, 0, fmt.Errorf("%s is link-local: a session to it would need an interface", addr)
	}
	if !hasPort {
		return addr, v1.DefaultListenPort, nil
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return netip.Addr{}, 0, fmt.Errorf("port %q is not in 1..65535", portStr)
	}
	return addr, uint16(port), nil
}

// The schema's limits on the lengths of strings and lists (the markers in apis/v1 repeat them):
// what the API server refuses is refused here too, for the objects tabbyctl validates before
// writing them and the agents read.
const (
	maxSelectorLen = 1024 // a nodeSelector, a peerSelector
	maxNameLen     = 253  // a Node's or a BGPFilter's name
	maxPeerIPLen   = 47   // [IPv6]:port
	maxCIDRLen     = 43   // an IPv6 prefix
	maxPeerFilters = 16
)

// tooLong counts characters, as the API server's maxLength does.
func tooLong(path *field.Path, v string, max int) *field.Error {
	if utf8.RuneCountInString(v) > max {
		return field.TooLongCharacters(path, v, max)
	}
	return nil
}

func selectorErr(path *field.Path, expr string) *field.Error {
	if e := tooLong(path, expr, maxSelectorLen); e != nil {
		return e
	}
	if _, err := selector.Parse(expr); err != nil {
		return field.Invalid(path, expr, err.Error())
	}
	return nil
}

// ParseIPPool validates an IPPool and returns it parsed, defaults applied: the one place a pool's
// spec is read. Every error names its field; the pool is valid only when there is none.
func ParseIPPool(p *v1.IPPool) (model.Pool, field.ErrorList) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	out := model.Pool{Name: p.Name, IPIPMode: p.Spec.IPIPMode, NATOutgoing: p.Spec.NATOutgoing, Disabled: p.Spec.Disabled, NodeSelector: p.Spec.NodeSelector}
	cidr, err := ParseCIDR(p.Spec.CIDR)
	if err != nil {
		errs = append(errs, field.Invalid(spec.Child("cidr"), p.Spec.CIDR, err.Error()))
	} else if e := tooLong(spec.Child("cidr"), p.Spec.CIDR, maxCIDRLen); e != nil {
		errs = append(errs, e)
	}
	out.CIDR = cidr
	// Without a valid cidr the family is unknown: the block size is judged as IPv4's, as the
	// pools written before IPv6 were.
	fam := ipfamily.OfPrefix(cidr)
	if fam == ipfamily.Unknown {
		fam = ipfamily.IPv4
	}
	def, lo, hi := model.BlockSizes(fam)
	out.BlockSize = p.Spec.BlockSize
	if out.BlockSize == 0 {
		out.BlockSize = def
	}
	if bs := out.BlockSize; bs < lo || bs > hi {
		errs = append(errs, field.Invalid(spec.Child("blockSize"), bs, fmt.Sprintf("must be between %d and %d for an %s pool", lo, hi, fam)))
	} else if err == nil && cidr.Bits() > bs && !slices.Contains(p.Spec.AllowedUses, v1.IPPoolUseLoadBalancer) {
		errs = append(errs, field.Invalid(spec.Child("blockSize"), bs, fmt.Sprintf("is larger than the pool: cidr %s has prefix /%d", p.Spec.CIDR, cidr.Bits())))
	}
	switch p.Spec.IPIPMode {
	case "":
		out.IPIPMode = v1.IPIPModeNever
	case v1.IPIPModeNever:
	case v1.IPIPModeAlways, v1.IPIPModeCrossSubnet:
		if fam == ipfamily.IPv6 {
			errs = append(errs, field.Invalid(spec.Child("ipipMode"), p.Spec.IPIPMode, "is IPv4-only: an IPv6 pool's ipipMode must be Never or unset"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("ipipMode"), p.Spec.IPIPMode, []string{string(v1.IPIPModeNever), string(v1.IPIPModeAlways), string(v1.IPIPModeCrossSubnet)}))
	}
	out.VXLANMode = p.Spec.VXLANMode
	switch p.Spec.VXLANMode {
	case "":
		out.VXLANMode = v1.VXLANModeNever
	case v1.VXLANModeNever:
	case v1.VXLANModeAlways, v1.VXLANModeCrossSubnet:
		if out.IPIPMode != v1.IPIPModeNever {
			errs = append(errs, field.Invalid(spec.Child("vxlanMode"), p.Spec.VXLANMode, fmt.Sprintf("cannot be used with ipipMode %s: a pool encapsulates one way at most", out.IPIPMode)))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("vxlanMode"), p.Spec.VXLANMode, []string{string(v1.VXLANModeNever), string(v1.VXLANModeAlways), string(v1.VXLANModeCrossSubnet)}))
	}
	if e := selectorErr(spec.Child("nodeSelector"), p.Spec.NodeSelector); e != nil {
		errs = append(errs, e)
	} else {
		out.Selector = selector.MustParse(p.Spec.NodeSelector)
	}
	var useErrs field.ErrorList
	out.Uses, out.AssignmentMode, useErrs = parseUses(spec, p.Spec, out)
	errs = append(errs, useErrs...)
	if len(errs) > 0 {
		return model.Pool{}, errs
	}
	return out, nil
}

// parseUses reads allowedUses and assignmentMode: defaults applied, uses sorted; each once, as
// the schema's list type set wants them.
// LoadBalancer stands alone: a Service's address in a pod's block, or a pod's in a Service's
// pool, would be handed out twice by two allocators that cannot see each other.
func parseUses(spec *field.Path, s v1.IPPoolSpec, pool model.Pool) ([]v1.IPPoolUse, v1.AssignmentMode, field.ErrorList) {
	var errs field.ErrorList
	uses := []v1.IPPoolUse{v1.IPPoolUseTunnel, v1.IPPoolUseWorkload}
	if len(s.AllowedUses) > 0 {
		uses = nil
		for i, u := range s.AllowedUses {
			switch u {
			case v1.IPPoolUseWorkload, v1.IPPoolUseTunnel, v1.IPPoolUseLoadBalancer:
				if slices.Contains(uses, u) {
					errs = append(errs, field.Duplicate(spec.Child("allowedUses").Index(i), u))
					continue
				}
				uses = append(uses, u)
			default:
				errs = append(errs, field.NotSupported(spec.Child("allowedUses").Index(i), u, []string{string(v1.IPPoolUseWorkload), string(v1.IPPoolUseTunnel), string(v1.IPPoolUseLoadBalancer)}))
			}
		}
		slices.Sort(uses)
	}
	lb := slices.Contains(uses, v1.IPPoolUseLoadBalancer)
	if lb && len(uses) > 1 {
		errs = append(errs, field.Invalid(spec.Child("allowedUses"), s.AllowedUses, "LoadBalancer cannot be combined with Workload or Tunnel: a pool's addresses are either the pods' or the Services'"))
	}
	if lb && (pool.IPIP() || pool.VXLAN() || s.NodeSelector != "" && s.NodeSelector != "all()") {
		errs = append(errs, field.Invalid(spec.Child("allowedUses"), s.AllowedUses, "a LoadBalancer pool has ipipMode and vxlanMode Never and no nodeSelector: its addresses belong to no node"))
	}
	mode := s.AssignmentMode
	switch mode {
	case "":
		mode = v1.AssignmentModeAutomatic
	case v1.AssignmentModeAutomatic, v1.AssignmentModeManual:
	default:
		errs = append(errs, field.NotSupported(spec.Child("assignmentMode"), mode, []string{string(v1.AssignmentModeAutomatic), string(v1.AssignmentModeManual)}))
	}
	return uses, mode, errs
}

// IPPool validates an IPPool.
func IPPool(p *v1.IPPool) field.ErrorList {
	_, errs := ParseIPPool(p)
	return errs
}

// IPPoolOverlaps reports pools among others whose CIDR overlaps p's: the API server cannot see
// across objects, so the CLI and the agents check it. Pools of two families never overlap.
func IPPoolOverlaps(p *v1.IPPool, others []v1.IPPool) field.ErrorList {
	var errs field.ErrorList
	mine, err := ParseCIDR(p.Spec.CIDR)
	if err != nil {
		return nil
	}
	for _, o := range others {
		if o.Name == p.Name {
			continue
		}
		theirs, err := ParseCIDR(o.Spec.CIDR)
		if err == nil && mine.Overlaps(theirs) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "cidr"), p.Spec.CIDR, fmt.Sprintf("overlaps IPPool %s (%s)", o.Name, o.Spec.CIDR)))
		}
	}
	return errs
}

func duration(path *field.Path, d *time.Duration, min time.Duration) *field.Error {
	if d != nil && *d < min {
		return field.Invalid(path, d.String(), fmt.Sprintf("must be at least %s", min))
	}
	return nil
}

// BGPConfiguration validates a BGPConfiguration.
func BGPConfiguration(c *v1.BGPConfiguration) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if c.Name != v1.DefaultBGPConfigurationName {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, "is not allowed: BGPConfiguration is a singleton named default"))
	}
	if c.Spec.ASNumber != nil && *c.Spec.ASNumber == 0 {
		errs = append(errs, field.Invalid(spec.Child("asNumber"), 0, "must be between 1 and 4294967295"))
	}
	if c.Spec.ListenPort != nil && (*c.Spec.ListenPort < 1 || *c.Spec.ListenPort > 65535) {
		errs = append(errs, field.Invalid(spec.Child("listenPort"), *c.Spec.ListenPort, "must be between 1 and 65535"))
	}
	if e := MaxPaths(spec.Child("maxPaths"), c.Spec.MaxPaths); e != nil {
		errs = append(errs, e)
	}
	var ka, hold *time.Duration
	if c.Spec.KeepaliveTime != nil {
		ka = &c.Spec.KeepaliveTime.Duration
	}
	if c.Spec.HoldTime != nil {
		hold = &c.Spec.HoldTime.Duration
	}
	if e := duration(spec.Child("keepaliveTime"), ka, time.Second); e != nil {
		errs = append(errs, e)
	}
	if e := duration(spec.Child("holdTime"), hold, 3*time.Second); e != nil {
		errs = append(errs, e)
	}
	if ka != nil && hold != nil && *hold < 3**ka {
		errs = append(errs, field.Invalid(spec.Child("holdTime"), hold.String(), "must be at least 3 x spec.keepaliveTime"))
	}
	switch c.Spec.LogSeverity {
	case "", "Debug", "Info", "Warning", "Error":
	default:
		errs = append(errs, field.NotSupported(spec.Child("logSeverity"), c.Spec.LogSeverity, []string{"Debug", "Info", "Warning", "Error"}))
	}
	errs = append(errs, BFD(spec.Child("bfd"), c.Spec.BFD)...)
	for _, list := range []struct {
		name  string
		cidrs []v1.ServiceCIDR
	}{{"serviceClusterIPs", c.Spec.ServiceClusterIPs}, {"serviceExternalIPs", c.Spec.ServiceExternalIPs}, {"serviceLoadBalancerIPs", c.Spec.ServiceLoadBalancerIPs}} {
		for i, s := range list.cidrs {
			if _, err := ParseCIDR(s.CIDR); err != nil {
				errs = append(errs, field.Invalid(spec.Child(list.name).Index(i).Child("cidr"), s.CIDR, err.Error()))
			}
		}
	}
	_, advErrs := ParsePrefixAdvertisements(c)
	return append(errs, advErrs...)
}

// FelixConfiguration validates a FelixConfiguration: the singleton named default, its VNI and
// UDP port in range, its MTUs 0 (the uplink's minus the overhead) or an MTU.
func FelixConfiguration(c *v1.FelixConfiguration) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if c.Name != v1.DefaultFelixConfigurationName {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, "is not allowed: FelixConfiguration is a singleton named default"))
	}
	for _, f := range []struct {
		name    string
		v       *int
		lo, hi  int
		meaning string
	}{
		{"vxlanVNI", c.Spec.VXLANVNI, 1, 1<<24 - 1, "a VXLAN network identifier"},
		{"vxlanPort", c.Spec.VXLANPort, 1, 65535, "a UDP port"},
		{"vxlanMTU", c.Spec.VXLANMTU, 0, 65535, "an MTU (0: the uplink's minus the overhead)"},
		{"vxlanMTUV6", c.Spec.VXLANMTUV6, 0, 65535, "an MTU (0: the uplink's minus the overhead)"},
	} {
		if f.v != nil && (*f.v < f.lo || *f.v > f.hi) {
			errs = append(errs, field.Invalid(spec.Child(f.name), *f.v, fmt.Sprintf("must be between %d and %d: %s", f.lo, f.hi, f.meaning)))
		}
	}
	if fl := c.Spec.FlowLogs; fl != nil {
		p := spec.Child("flowLogs")
		if fl.FlushInterval != nil {
			if d := fl.FlushInterval.Duration; d < v1.MinFlowLogFlushInterval || d > v1.MaxFlowLogFlushInterval {
				errs = append(errs, field.Invalid(p.Child("flushInterval"), d.String(), fmt.Sprintf("must be between %s and %s", v1.MinFlowLogFlushInterval, v1.MaxFlowLogFlushInterval)))
			}
		}
		if n := fl.MaxRecords; n != nil && (*n < v1.MinFlowLogMaxRecords || *n > v1.MaxFlowLogMaxRecords) {
			errs = append(errs, field.Invalid(p.Child("maxRecords"), *n, fmt.Sprintf("must be between %d and %d: the records a node keeps", v1.MinFlowLogMaxRecords, v1.MaxFlowLogMaxRecords)))
		}
	}
	return errs
}

// BGPPeer validates a BGPPeer.
func BGPPeer(p *v1.BGPPeer) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := p.Spec
	if s.Node != "" && s.NodeSelector != "" {
		errs = append(errs, field.Forbidden(spec.Child("nodeSelector"), "node and nodeSelector are mutually exclusive: set at most one"))
	}
	if e := tooLong(spec.Child("node"), s.Node, maxNameLen); e != nil {
		errs = append(errs, e)
	}
	if (s.PeerIP == "") == (s.PeerSelector == "") {
		errs = append(errs, field.Invalid(spec.Child("peerIP"), s.PeerIP, "exactly one of peerIP and peerSelector must be set"))
	}
	if s.PeerIP != "" {
		if _, _, err := ParsePeerIP(s.PeerIP); err != nil {
			errs = append(errs, field.Invalid(spec.Child("peerIP"), s.PeerIP, err.Error()))
		} else if e := tooLong(spec.Child("peerIP"), s.PeerIP, maxPeerIPLen); e != nil {
			errs = append(errs, e)
		}
		if s.ASNumber == 0 {
			errs = append(errs, field.Required(spec.Child("asNumber"), "asNumber is required with peerIP"))
		}
	}
	if e := selectorErr(spec.Child("nodeSelector"), s.NodeSelector); e != nil {
		errs = append(errs, e)
	}
	if s.PeerSelector != "" {
		if e := selectorErr(spec.Child("peerSelector"), s.PeerSelector); e != nil {
			errs = append(errs, e)
		}
	}
	if s.Password != nil && s.Password.SecretKeyRef != nil {
		ref := spec.Child("password", "secretKeyRef")
		if s.Password.SecretKeyRef.Name == "" {
			errs = append(errs, field.Required(ref.Child("name"), "the Secret's name"))
		}
		if s.Password.SecretKeyRef.Key == "" {
			errs = append(errs, field.Required(ref.Child("key"), "the key in the Secret"))
		}
	}
	if s.EBGPMultihop < 0 || s.EBGPMultihop > 255 {
		errs = append(errs, field.Invalid(spec.Child("ebgpMultihop"), s.EBGPMultihop, "must be between 1 and 255"))
	}
	errs = append(errs, validFilterNames(spec.Child("filters"), s.Filters)...)
	if s.MaxRestartTime != nil {
		if e := duration(spec.Child("maxRestartTime"), &s.MaxRestartTime.Duration, time.Second); e != nil {
			errs = append(errs, e)
		}
	}
	errs = append(errs, BFD(spec.Child("bfd"), s.BFD)...)
	if s.BFD != nil && s.BFD.Enabled && s.EBGPMultihop > 1 {
		errs = append(errs, field.Invalid(spec.Child("bfd", "enabled"), true, fmt.Sprintf("tabby's BFD is single hop (RFC 5881): not with ebgpMultihop %d", s.EBGPMultihop)))
	}
	return errs
}

// The range of a BFD interval and multiplier. RFC 5880 allows a multiplier of 1, which
// declares a peer down on a single lost packet; FRR and BIRD take 2 and up.
const (
	MinBFDInterval   = 10 * time.Millisecond
	MaxBFDInterval   = 60 * time.Second
	MinBFDMultiplier = 2
	MaxBFDMultiplier = 255
)

// BFD validates a BGPPeer's or the BGPConfiguration's bfd.
func BFD(path *field.Path, b *v1.BFD) field.ErrorList {
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	for _, iv := range []struct {
		name string
		d    *metav1.Duration
	}{{"minRx", b.MinRx}, {"minTx", b.MinTx}} {
		if iv.d != nil && (iv.d.Duration < MinBFDInterval || iv.d.Duration > MaxBFDInterval) {
			errs = append(errs, field.Invalid(path.Child(iv.name), iv.d.Duration.String(), fmt.Sprintf("must be between %s and %s", MinBFDInterval, MaxBFDInterval)))
		}
	}
	if b.Multiplier != nil && (*b.Multiplier < MinBFDMultiplier || *b.Multiplier > MaxBFDMultiplier) {
		errs = append(errs, field.Invalid(path.Child("multiplier"), *b.Multiplier, fmt.Sprintf("must be between %d and %d", MinBFDMultiplier, MaxBFDMultiplier)))
	}
	return errs
}

// bgpAddressAnnotation names the node's BGP address annotation of each family.
var bgpAddressAnnotation = ipfamily.PairOf(v1.AnnotationBGPIPv4Address, v1.AnnotationBGPIPv6Address)

// ParseNode returns what tabby reads of a Kubernetes Node, its tabby annotations validated and
// parsed in one pass: the one place they are read. A node with an invalid tabby annotation keeps
// its name, labels, InternalIPs and readiness and has none of what the annotations give (errs
// names each bad one); the restart mark (tabby.dev/bgp-restarting) is judged on its own, so a
// typo in a maintenance mark never takes the node's BGP address away.
func ParseNode(n *corev1.Node) (model.Node, field.ErrorList) {
	out, errs := parseAnnotations(n.Annotations)
	if len(errs) > 0 {
		out = model.Node{}
	}
	out.Name, out.Labels = n.Name, n.Labels
	if t, err := restartMark(n.Annotations); err != nil {
		errs = append(errs, err)
	} else {
		out.RestartingUntil = t
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil || ip.Is4In6() {
			continue
		}
		if f := ipfamily.OfAddr(ip); !out.InternalIP.Get(f).IsValid() {
			out.InternalIP.Set(f, ip)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			out.NotReady = true
		}
	}
	return out, errs
}

// RestartMarkOnly tells whether the errors of ParseNode are about the restart mark alone: the
// node then keeps its other annotations.
func RestartMarkOnly(errs field.ErrorList) bool {
	for _, e := range errs {
		if e.Field != annotationPath.Key(v1.AnnotationBGPRestarting).String() {
			return false
		}
	}
	return true
}

var annotationPath = field.NewPath("metadata", "annotations")

// parseAnnotations parses tabby's per-node BGP annotations other than the restart mark into the
// fields of a Node they give.
func parseAnnotations(annotations map[string]string) (model.Node, field.ErrorList) {
	var out model.Node
	var errs field.ErrorList
	for _, f := range ipfamily.All {
		key := bgpAddressAnnotation.Get(f)
		v, ok := annotations[key]
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(v)
		switch {
		case f == ipfamily.IPv4 && (err != nil || !p.Addr().Is4()):
			errs = append(errs, field.Invalid(annotationPath.Key(key), v, "not an IPv4 address with a prefix length (198.51.100.11/24)"))
		case f == ipfamily.IPv6 && (err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().IsLinkLocalUnicast()):
			errs = append(errs, field.Invalid(annotationPath.Key(key), v, "not a global IPv6 address with a prefix length (2001:db8:100::11/64)"))
		default:
			out.BGPAddress.Set(f, p)
		}
	}
	if v, ok := annotations[v1.AnnotationBGPASN]; ok {
		if n, err := strconv.ParseUint(v, 10, 32); err != nil || n == 0 {
			errs = append(errs, field.Invalid(annotationPath.Key(v1.AnnotationBGPASN), v, "not an AS number in 1..4294967295"))
		} else {
			out.ASN = uint32(n)
		}
	}
	if v, ok := annotations[v1.AnnotationRRClusterID]; ok {
		if a, err := netip.ParseAddr(v); err != nil || !a.Is4() {
			errs = append(errs, field.Invalid(annotationPath.Key(v1.AnnotationRRClusterID), v, "not a cluster ID in IPv4 form (244.0.0.1)"))
		} else {
			out.RRClusterID = v
		}
	}
	if v, ok := annotations[v1.AnnotationIPIPTunnelAddress]; ok {
		if a, err := netip.ParseAddr(v); err != nil || !a.Is4() {
			errs = append(errs, field.Invalid(annotationPath.Key(v1.AnnotationIPIPTunnelAddress), v, "not an IPv4 address"))
		} else {
			out.IPIPTunnelAddr = a
		}
	}
	if v, ok := annotations[v1.AnnotationNoBGP]; ok {
		if v != "true" {
			errs = append(errs, field.Invalid(annotationPath.Key(v1.AnnotationNoBGP), v, "must be true (tabby-node --bgp=none sets it) or unset"))
		} else {
			out.NoBGP = true
		}
	}
	for _, fam := range ipfamily.All {
		addrKey, macKey := v1.AnnotationVXLANIPv4TunnelAddress, v1.AnnotationVXLANIPv4MAC
		if fam == ipfamily.IPv6 {
			addrKey, macKey = v1.AnnotationVXLANIPv6TunnelAddress, v1.AnnotationVXLANIPv6MAC
		}
		if v, ok := annotations[addrKey]; ok {
			if a, err := netip.ParseAddr(v); err != nil || ipfamily.OfAddr(a) != fam || a.Is4In6() {
				errs = append(errs, field.Invalid(annotationPath.Key(addrKey), v, fmt.Sprintf("not an %s address", fam)))
			} else {
				out.VXLANTunnelAddr.Set(fam, a)
			}
		}
		if v, ok := annotations[macKey]; ok {
			if m, err := model.ParseMAC(v); err != nil || m.IsZero() {
				errs = append(errs, field.Invalid(annotationPath.Key(macKey), v, "not a 6-byte Ethernet address"))
			} else {
				out.VXLANMAC.Set(fam, m)
			}
		}
	}
	return out, errs
}

// restartMark parses the restart mark; zero when there is none.
func restartMark(annotations map[string]string) (time.Time, *field.Error) {
	v, ok := annotations[v1.AnnotationBGPRestarting]
	if !ok {
		return time.Time{}, nil
	}
	t, err := RestartingUntil(v)
	if err != nil {
		return time.Time{}, field.Invalid(annotationPath.Key(v1.AnnotationBGPRestarting), v, err.Error())
	}
	return t, nil
}

// NodeAnnotations validates tabby's per-node annotations, as ParseNode does.
func NodeAnnotations(annotations map[string]string) field.ErrorList {
	_, errs := parseAnnotations(annotations)
	if _, err := restartMark(annotations); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// RestartingUntil parses a tabby.dev/bgp-restarting value (RFC 3339).
func RestartingUntil(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 time (2026-11-21T10:30:00Z)")
	}
	return t, nil
}

// MaxPaths checks BGPConfiguration maxPaths (nil: the default).
func MaxPaths(path *field.Path, n *int32) *field.Error {
	if n != nil && (*n < 1 || *n > v1.MaxMaxPaths) {
		return field.Invalid(path, *n, fmt.Sprintf("must be between 1 and %d", v1.MaxMaxPaths))
	}
	return nil
}
