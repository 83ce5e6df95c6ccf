package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	netutils "k8s.io/utils/net"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Calculator is an Input compiled once (selectors parsed, CIDRs and ports checked), so that
// Render, Explain and Verdict agree on every interpretation of the API objects, including
// what to do with an object the API server should have rejected. It never changes after
// NewCalculator and holds the Input's maps, pods and policies by reference: Render, Explain and
// Verdict read them, so the caller must not modify them before its last such call. It is the
// whole-cluster calculation: tabbyctl's, and the reference State is tested against.
type Calculator struct {
	pods     []*Pod // sorted by Key; every pod, host network included
	podByKey map[Key]*Pod
	ips      map[Key][]netip.Addr // Input.IPs; nil: each Pod's own
	// podsByIP: pod-network pods only, sorted by Key; built on the first verdict (only
	// verdicts read it, and felix keeps its last calculator).
	podsByIPOnce sync.Once
	podsByIP     map[netip.Addr][]*Pod
	nsLabels     map[string]labels.Set
	policies     []*compiledPolicy // sorted by Key
	admins       []*compiledAdmin  // in evaluation order (compareAdmins)
	nodes        map[string]*Node
	endpoints    []Endpoint // usable ones, sorted by Interface
	// flowLogs: Render logs each verdict (SetFlowLogs).
	flowLogs bool
	problems []string
}

type direction uint8

const (
	ingress direction = iota
	egress
)

func (d direction) String() string {
	if d == egress {
		return "egress"
	}
	return "ingress"
}

// compiledPolicy is one NetworkPolicy compiled; it never changes (a changed policy is compiled
// again), so a chain rendered from it can be compared by the policies' identity.
type compiledPolicy struct {
	key Key
	src *networkingv1.NetworkPolicy
	// selector is nil when spec.podSelector is invalid: the policy then selects no pod (the
	// API server rejects such a selector, so this only guards against a hand-made input).
	selector labels.Selector
	applies  [2]bool // per direction, from policyTypes (explicit or implied)
	rules    [2][]compiledRule
	// problems: what compiling it had to ignore.
	problems []string
}

type compiledRule struct {
	allPeers bool // from/to empty: every source/destination
	peers    []peer
	allPorts bool // ports empty: every protocol and port
	ports    []portSpec
}

type peerKind uint8

const (
	peerInvalid peerKind = iota // matches nothing
	peerPods
	peerBlock
	peerNodes // an admin policy's nodes peer
)

type peer struct {
	kind  peerKind
	pods  podSelection
	block ipBlock
	nodes nodeSelection
}

// podSelection is one distinct set of pods a peer selects: the identity is what makes two
// policies share a set.
type podSelection struct {
	// namespace is the policy's namespace when the peer has no namespaceSelector; then nsSel
	// is nil.
	namespace string
	nsSel     labels.Selector
	podSel    labels.Selector
	id        string
	setName   ipfamily.Pair[string] // its hash:ip set in each family
}

// selects tells whether s picks pod; nsLabels gives a namespace's labels (asked only for a
// namespaceSelector).
func (s *podSelection) selects(pod *Pod, nsLabels func(string) labels.Set) bool {
	if pod.HostNetwork {
		return false
	}
	if s.nsSel == nil {
		if pod.Namespace != s.namespace {
			return false
		}
	} else if !s.nsSel.Matches(nsLabels(pod.Namespace)) {
		return false
	}
	return s.podSel.Matches(labels.Set(pod.Labels))
}

type ipBlock struct {
	cidr   netip.Prefix
	except []netip.Prefix // sorted, deduplicated, same family as cidr
	id     string
	// setName and members are its hash:net set, in cidr's family; no members: it matches no
	// address and renders no rule.
	setName string
	members []string
}

type portKind uint8

const (
	portAll   portKind = iota // every port of the protocol
	portRange                 // from..to (a single port has from == to)
	portNamed
)

type portSpec struct {
	proto    Protocol
	kind     portKind
	from, to uint16
	name     string
	setName  ipfamily.Pair[string] // a named port's hash:ip,port set in each family
}

// NewCalculator compiles in. Problems lists what it had to ignore.
func NewCalculator(in Input) *Calculator {
	c := &Calculator{
		ips: in.IPs,
		// The input's map serves as the index (the calculator holds the input by reference
		// anyway), unless an entry needs mending: a second map would grow with the cluster.
		podByKey: in.Pods,
		pods:     make([]*Pod, 0, len(in.Pods)),
		nsLabels: make(map[string]labels.Set, len(in.Namespaces)),
	}
	for _, ns := range in.Namespaces {
		if ns == nil {
			continue
		}
		c.nsLabels[ns.Name] = namespaceLabels(ns.Name, ns.Labels)
	}
	own := false
	for k, p := range in.Pods {
		if p == nil || p.Key != k {
			own = true
			c.podByKey = make(map[Key]*Pod, len(in.Pods))
			break
		}
	}
	for k, p := range in.Pods {
		if p == nil {
			continue
		}
		if p.Key != k {
			c.problemf("pod %s: stored under key %s; using %s", p.Key, k, k)
			cp := *p
			cp.Key = k
			p = &cp
		}
		c.pods = append(c.pods, p)
		if own {
			c.podByKey[k] = p
		}
	}
	slices.SortFunc(c.pods, func(a, b *Pod) int { return compareKeys(a.Key, b.Key) })
	for k, np := range in.Policies {
		if np == nil {
			continue
		}
		cp := compilePolicy(k, np)
		c.policies = append(c.policies, cp)
		c.problems = append(c.problems, cp.problems...)
	}
	slices.SortFunc(c.policies, func(a, b *compiledPolicy) int { return compareKeys(a.key, b.key) })
	for k, ap := range in.Admin {
		if ap == nil {
			continue
		}
		if ap.Key() != k {
			c.problemf("%s: stored under key %s; ignored", ap.Key(), k)
			continue
		}
		ca := compileAdmin(ap)
		c.admins = append(c.admins, ca)
		c.problems = append(c.problems, ca.problems...)
	}
	slices.SortFunc(c.admins, compareAdmins)
	c.nodes = in.Nodes
	c.endpoints = c.usableEndpoints(in.Endpoints)
	slices.Sort(c.problems)
	c.problems = slices.Compact(c.problems)
	return c
}

// Problems lists, sorted, every part of the input the calculator ignored and what it did
// instead. Each ignored part fails closed: a peer or port that cannot be understood matches
// nothing.
func (c *Calculator) Problems() []string { return slices.Clone(c.problems) }

func (c *Calculator) problemf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// namespaceLabels adds kubernetes.io/metadata.name, which the API server sets on every
// namespace, so a selector by namespace name also works for a namespace the caller has not
// seen yet (informers deliver pods and namespaces in no particular order).
func namespaceLabels(name string, l map[string]string) labels.Set {
	out := make(labels.Set, len(l)+1)
	for k, v := range l {
		out[k] = v
	}
	out[corev1.LabelMetadataName] = name
	return out
}

func (c *Calculator) namespaceLabels(ns string) labels.Set {
	if l, ok := c.nsLabels[ns]; ok {
		return l
	}
	return namespaceLabels(ns, nil)
}

func compareKeys(a, b Key) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// compilePolicy compiles np, stored under k; what it has to ignore is in its problems.
func compilePolicy(k Key, np *networkingv1.NetworkPolicy) *compiledPolicy {
	cp := &compiledPolicy{key: k, src: np}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		cp.problemf("policy %s: spec.podSelector: %v; the policy selects no pod", k, err)
	} else {
		cp.selector = sel
	}
	if len(np.Spec.PolicyTypes) == 0 {
		cp.applies[ingress] = true
		cp.applies[egress] = len(np.Spec.Egress) > 0
	}
	for i, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			cp.applies[ingress] = true
		case networkingv1.PolicyTypeEgress:
			cp.applies[egress] = true
		default:
			cp.problemf("policy %s: spec.policyTypes[%d]: unknown type %q ignored", k, i, t)
		}
	}
	for i, r := range np.Spec.Ingress {
		field := fmt.Sprintf("spec.ingress[%d]", i)
		cp.rules[ingress] = append(cp.rules[ingress], cp.compileRule(field, "from", r.From, r.Ports))
	}
	for i, r := range np.Spec.Egress {
		field := fmt.Sprintf("spec.egress[%d]", i)
		cp.rules[egress] = append(cp.rules[egress], cp.compileRule(field, "to", r.To, r.Ports))
	}
	return cp
}

func (cp *compiledPolicy) problemf(format string, args ...any) {
	cp.problems = append(cp.problems, fmt.Sprintf(format, args...))
}

func (cp *compiledPolicy) compileRule(field, peersField string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) compiledRule {
	k := cp.key
	r := compiledRule{allPeers: len(peers) == 0, allPorts: len(ports) == 0}
	for i := range peers {
		r.peers = append(r.peers, cp.compilePeer(fmt.Sprintf("%s.%s[%d]", field, peersField, i), &peers[i]))
	}
	for i := range ports {
		p, err := compilePort(&ports[i])
		if err != nil {
			cp.problemf("policy %s: %s.ports[%d]: %v; the port matches nothing", k, field, i, err)
			continue
		}
		r.ports = append(r.ports, p)
	}
	return r
}

func (cp *compiledPolicy) compilePeer(field string, p *networkingv1.NetworkPolicyPeer) peer {
	k := cp.key
	fail := func(format string, args ...any) peer {
		cp.problemf("policy %s: %s: %s; the peer matches nothing", k, field, fmt.Sprintf(format, args...))
		return peer{kind: peerInvalid}
	}
	if p.IPBlock != nil {
		if p.PodSelector != nil || p.NamespaceSelector != nil {
			return fail("ipBlock together with a pod or namespace selector")
		}
		b, err := compileIPBlock(p.IPBlock)
		if err != nil {
			return fail("ipBlock: %v", err)
		}
		return peer{kind: peerBlock, block: b}
	}
	if p.PodSelector == nil && p.NamespaceSelector == nil {
		return fail("no podSelector, namespaceSelector or ipBlock")
	}
	s := podSelection{podSel: labels.Everything()}
	if p.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.PodSelector)
		if err != nil {
			return fail("podSelector: %v", err)
		}
		s.podSel = sel
	}
	if p.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
		if err != nil {
			return fail("namespaceSelector: %v", err)
		}
		s.nsSel = sel
		s.id = "nssel=" + strconv.Quote(sel.String()) + " pods=" + strconv.Quote(s.podSel.String())
	} else {
		s.namespace = k.Namespace
		s.id = "ns=" + strconv.Quote(k.Namespace) + " pods=" + strconv.Quote(s.podSel.String())
	}
	for _, fam := range ipfamily.All {
		s.setName.Set(fam, setName(setKindPods, fam, s.id))
	}
	return peer{kind: peerPods, pods: s}
}

func parseCIDR(s string) (netip.Prefix, error) {
	// Sloppy, as the API server's validation: a leading zero in an IPv4 octet is accepted in
	// objects stored by older versions, and host bits may be set.
	_, n, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("cidr %q: %w", s, err)
	}
	a, ok := netip.AddrFromSlice(n.IP)
	ones, bits := n.Mask.Size()
	if !ok || bits == 0 {
		return netip.Prefix{}, fmt.Errorf("cidr %q: not an address prefix", s)
	}
	if bits == 128 && a.Is4In6() {
		return netip.Prefix{}, fmt.Errorf("cidr %q: an IPv4-mapped IPv6 prefix", s)
	}
	return netip.PrefixFrom(a.Unmap(), ones).Masked(), nil
}

func compileIPBlock(b *networkingv1.IPBlock) (ipBlock, error) {
	cidr, err := parseCIDR(b.CIDR)
	if err != nil {
		return ipBlock{}, err
	}
	out := ipBlock{cidr: cidr}
	for i, e := range b.Except {
		ex, err := parseCIDR(e)
		if err != nil {
			return ipBlock{}, fmt.Errorf("except[%d]: %w", i, err)
		}
		if ipfamily.OfPrefix(ex) != ipfamily.OfPrefix(cidr) {
			return ipBlock{}, fmt.Errorf("except[%d] %s: not of the family of cidr %s", i, ex, cidr)
		}
		// Kept even when not a strict subset of cidr (the API server rejects that): matching
		// stays "in cidr and in no except", and rendering handles every overlap.
		out.except = append(out.except, ex)
	}
	slices.SortFunc(out.except, ipfamily.ComparePrefixes)
	out.except = slices.Compact(out.except)
	parts := []string{cidr.String()}
	for _, e := range out.except {
		parts = append(parts, "!"+e.String())
	}
	out.id = strings.Join(parts, " ")
	out.members = blockMembers(out)
	if len(out.members) > 0 {
		out.setName = setName(setKindCIDR, ipfamily.OfPrefix(cidr), out.id)
	}
	return out, nil
}

func (b ipBlock) contains(ip netip.Addr) bool {
	if !b.cidr.Contains(ip) {
		return false
	}
	for _, e := range b.except {
		if e.Contains(ip) {
			return false
		}
	}
	return true
}

func compilePort(p *networkingv1.NetworkPolicyPort) (portSpec, error) {
	ps := portSpec{proto: Protocol(corev1.ProtocolTCP)}
	if p.Protocol != nil {
		ps.proto = Protocol(*p.Protocol)
	}
	if _, ok := iptablesProtocol(ps.proto); !ok {
		return portSpec{}, fmt.Errorf("protocol %q: not TCP, UDP or SCTP", ps.proto)
	}
	switch {
	case p.Port == nil:
		if p.EndPort != nil {
			return portSpec{}, fmt.Errorf("endPort %d without port", *p.EndPort)
		}
		ps.kind = portAll
	case p.Port.Type == intstr.String:
		if p.EndPort != nil {
			return portSpec{}, fmt.Errorf("endPort %d with the named port %q", *p.EndPort, p.Port.StrVal)
		}
		if p.Port.StrVal == "" {
			return portSpec{}, fmt.Errorf("port: empty name")
		}
		ps.kind, ps.name = portNamed, p.Port.StrVal
		for _, fam := range ipfamily.All {
			ps.setName.Set(fam, namedPortSetName(ps.name, ps.proto, fam))
		}
	default:
		from := p.Port.IntVal
		to := from
		if p.EndPort != nil {
			to = *p.EndPort
		}
		if from < 1 || from > 65535 {
			return portSpec{}, fmt.Errorf("port %d: not in 1-65535", from)
		}
		if to < from || to > 65535 {
			return portSpec{}, fmt.Errorf("endPort %d: not in %d-65535", to, from)
		}
		ps.kind, ps.from, ps.to = portRange, uint16(from), uint16(to)
	}
	return ps, nil
}

// iptablesProtocol is the protocol's name for `-p`, `-m` and ipset's "proto:port".
func iptablesProtocol(p Protocol) (string, bool) {
	switch p {
	case Protocol(corev1.ProtocolTCP):
		return "tcp", true
	case Protocol(corev1.ProtocolUDP):
		return "udp", true
	case Protocol(corev1.ProtocolSCTP):
		return "sctp", true
	}
	return "", false
}

// namedPortProtocol treats an empty container port protocol as TCP, the API's default.
func namedPortProtocol(np NamedPort) Protocol {
	if np.Protocol == "" {
		return Protocol(corev1.ProtocolTCP)
	}
	return np.Protocol
}

// resolveNamedPort is the port numbers that name (for proto) has on pod.
func resolveNamedPort(pod *Pod, name string, proto Protocol) []uint16 {
	var out []uint16
	for _, np := range pod.NamedPorts {
		if np.Name == name && namedPortProtocol(np) == proto && np.Port != 0 {
			out = append(out, np.Port)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// usableEndpoints drops what cannot be policed by interface: a name iptables would read as a
// wildcard or that is too long for a chain name, an interface two pods claim, a pod unknown or
// on the host network. Their traffic falls to the dispatch chains' final DROP when policy is
// in force, as for a pod not programmed yet.
func (c *Calculator) usableEndpoints(eps []Endpoint) []Endpoint {
	byIface := map[string][]Endpoint{}
	for _, ep := range eps {
		byIface[ep.Interface] = append(byIface[ep.Interface], ep)
	}
	var out []Endpoint
	for iface, list := range byIface {
		if !validInterface(iface) {
			c.problemf("endpoint %q (pod %s): not a usable interface name; not policed (dropped while policy is in force)", iface, list[0].Pod)
			continue
		}
		pod := list[0].Pod
		conflict := false
		for _, ep := range list[1:] {
			if ep.Pod != pod {
				conflict = true
			}
		}
		if conflict {
			c.problemf("endpoint %q: claimed by several pods; not policed (dropped while policy is in force)", iface)
			continue
		}
		p := c.podByKey[pod]
		if p == nil || p.HostNetwork {
			// An unknown pod is ordinary (the CNI ADD ran before the informer saw the pod);
			// not a problem worth reporting.
			continue
		}
		out = append(out, Endpoint{Interface: iface, Pod: pod})
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return strings.Compare(a.Interface, b.Interface) })
	return out
}

// validInterface accepts the names the kernel accepts and iptables reads literally, and that
// keep "tabby-tw-" + name within iptables' 28-character chain names.
func validInterface(s string) bool {
	if s == "" || len(s) > 15 || !strings.HasPrefix(s, names.HostVethPrefix) {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// podsAt lists the pod-network pods holding ip, sorted by Key.
func (c *Calculator) podsAt(ip netip.Addr) []*Pod {
	c.podsByIPOnce.Do(func() {
		c.podsByIP = map[netip.Addr][]*Pod{}
		for _, p := range c.pods {
			if p.HostNetwork {
				continue
			}
			for _, a := range c.addrs(p) {
				if a = a.Unmap(); a.IsValid() && !slices.Contains(c.podsByIP[a], p) {
					c.podsByIP[a] = append(c.podsByIP[a], p)
				}
			}
		}
	})
	return c.podsByIP[ip]
}

// selects tells whether p applies to pod in direction d.
func (p *compiledPolicy) selects(pod *Pod, d direction) bool {
	return p.applies[d] && p.selector != nil && !pod.HostNetwork &&
		pod.Namespace == p.key.Namespace && p.selector.Matches(labels.Set(pod.Labels))
}

// selecting lists, in Key order, the policies that apply to pod in direction d.
func (c *Calculator) selecting(pod *Pod, d direction) []*compiledPolicy {
	var out []*compiledPolicy
	for _, p := range c.policies {
		if p.selects(pod, d) {
			out = append(out, p)
		}
	}
	return out
}

// adminSelecting lists, in evaluation order, the admin policies of tier t whose subject is pod
// and which have rules in direction d.
func (c *Calculator) adminSelecting(pod *Pod, d direction, t Tier) []*compiledAdmin {
	return adminsSelecting(c.admins, pod, d, t, c.namespaceLabels)
}

func adminsSelecting(admins []*compiledAdmin, pod *Pod, d direction, t Tier, nsLabels func(string) labels.Set) []*compiledAdmin {
	var out []*compiledAdmin
	for _, a := range admins {
		if a.tier == t && len(a.rules[d]) > 0 && a.selects(pod, nsLabels) {
			out = append(out, a)
		}
	}
	return out
}

// selectsPod tells whether a pod-selection peer picks pod.
func (c *Calculator) selectsPod(s *podSelection, pod *Pod) bool {
	return s.selects(pod, c.namespaceLabels)
}

// addrs is pod's addresses: Input.IPs's, else its own.
func (c *Calculator) addrs(pod *Pod) []netip.Addr { return addrsOf(c.ips, pod) }
