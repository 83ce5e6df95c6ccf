package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Tier is where a cluster-wide policy is evaluated: AdminNetworkPolicies before
// NetworkPolicy, the BaselineAdminNetworkPolicy after it.
type Tier uint8

const (
	TierAdmin    Tier = iota // AdminNetworkPolicy
	TierBaseline             // BaselineAdminNetworkPolicy
)

func (t Tier) String() string {
	if t == TierBaseline {
		return "BaselineAdminNetworkPolicy"
	}
	return "AdminNetworkPolicy"
}

// Action is what an admin rule does with a packet it matches.
type Action string

const (
	ActionAllow Action = "Allow"
	ActionDeny  Action = "Deny"
	// ActionPass skips the remaining AdminNetworkPolicy rules: NetworkPolicy decides, then the
	// baseline.
	ActionPass Action = "Pass"
)

// AdminPolicy is an AdminNetworkPolicy or the BaselineAdminNetworkPolicy as policy reads it,
// parsed once at the edge (FromANP, FromBANP): what tabby cannot enforce is left out there
// and named in Unsupported.
type AdminPolicy struct {
	Kind string // KindANP, KindBANP or KindCNP
	Tier Tier
	Name string
	// Priority orders the AdminNetworkPolicies, lower first (0-1000); 0 for the baseline.
	Priority        int32
	ResourceVersion string
	// Generation is the object's metadata.generation: the status conditions say which one
	// they judged.
	Generation      int64
	Subject         AdminSubject
	Ingress, Egress []AdminRule
	// Unsupported lists the fields left out, by path ("spec.egress[1].to[0].domainNames").
	Unsupported []string
}

// The kinds of admin policy.
const (
	KindANP  = "AdminNetworkPolicy"
	KindBANP = "BaselineAdminNetworkPolicy"
	KindCNP  = "ClusterNetworkPolicy"
)

// Key is the policy's name in messages and maps: its kind and name.
func (p *AdminPolicy) Key() AdminKey { return AdminKey{Kind: p.Kind, Name: p.Name} }

// AdminKey names an admin policy.
type AdminKey struct {
	Kind string
	Name string
}

func (k AdminKey) String() string { return k.Kind + "/" + k.Name }

// AdminSubject selects pods by namespace, or by namespace and pod labels.
type AdminSubject struct {
	Namespaces *metav1.LabelSelector
	Pods       *NamespacedPods
}

// NamespacedPods selects the pods matching PodSelector in the namespaces matching
// NamespaceSelector.
type NamespacedPods struct {
	NamespaceSelector, PodSelector metav1.LabelSelector
}

// AdminRule is one rule: its action, peers (at least one: the API requires them) and ports
// (nil: every port and protocol).
type AdminRule struct {
	Name   string
	Action Action
	Peers  []AdminPeer
	Ports  []AdminPort
	// AllPorts: the rule lists no ports.
	AllPorts bool
}

// AdminPeer is one of a rule's peers: exactly one field is set.
type AdminPeer struct {
	Namespaces *metav1.LabelSelector
	Pods       *NamespacedPods
	// Nodes (egress only) selects nodes: their InternalIPs and BGP addresses.
	Nodes *metav1.LabelSelector
	// Networks (egress only) are CIDRs.
	Networks []string
	// Unsupported: the peer has a field tabby does not enforce (domainNames): it matches
	// nothing. A peer with no field at all is one of a newer API with a field unknown here.
	Unsupported bool
}

func (p *AdminPeer) empty() bool {
	return p.Namespaces == nil && p.Pods == nil && p.Nodes == nil && len(p.Networks) == 0 && !p.Unsupported
}

// AdminPort is a port entry: a number, a range (Port..EndPort), every port of Protocol
// (AllOfProtocol) or a name.
type AdminPort struct {
	Protocol      Protocol
	Port, EndPort int32
	AllOfProtocol bool
	Name          string
}

// FromANP parses an AdminNetworkPolicy.
func FromANP(anp *anpv1alpha1.AdminNetworkPolicy) *AdminPolicy {
	p := &AdminPolicy{Kind: KindANP, Tier: TierAdmin, Name: anp.Name, Priority: anp.Spec.Priority, ResourceVersion: anp.ResourceVersion, Generation: anp.Generation}
	p.Subject = subjectOf(anp.Spec.Subject)
	for _, r := range anp.Spec.Ingress {
		rule := AdminRule{Name: r.Name, Action: Action(r.Action)}
		for _, peer := range r.From {
			rule.Peers = append(rule.Peers, AdminPeer{Namespaces: peer.Namespaces, Pods: namespacedPods(peer.Pods)})
		}
		rule.Ports, rule.AllPorts = portsOf(r.Ports)
		p.Ingress = append(p.Ingress, rule)
	}
	for i, r := range anp.Spec.Egress {
		rule := AdminRule{Name: r.Name, Action: Action(r.Action)}
		for j, peer := range r.To {
			ep := egressPeer(peer.Namespaces, peer.Pods, peer.Nodes, peer.Networks)
			if len(peer.DomainNames) > 0 {
				p.Unsupported = append(p.Unsupported, unsupportedDomainNames(i, j, peer.DomainNames))
				ep.Unsupported = true
			}
			rule.Peers = append(rule.Peers, ep)
		}
		rule.Ports, rule.AllPorts = portsOf(r.Ports)
		p.Egress = append(p.Egress, rule)
	}
	return p
}

// FromBANP parses a BaselineAdminNetworkPolicy.
func FromBANP(banp *anpv1alpha1.BaselineAdminNetworkPolicy) *AdminPolicy {
	p := &AdminPolicy{Kind: KindBANP, Tier: TierBaseline, Name: banp.Name, ResourceVersion: banp.ResourceVersion, Generation: banp.Generation}
	p.Subject = subjectOf(banp.Spec.Subject)
	for _, r := range banp.Spec.Ingress {
		rule := AdminRule{Name: r.Name, Action: Action(r.Action)}
		for _, peer := range r.From {
			rule.Peers = append(rule.Peers, AdminPeer{Namespaces: peer.Namespaces, Pods: namespacedPods(peer.Pods)})
		}
		rule.Ports, rule.AllPorts = portsOf(r.Ports)
		p.Ingress = append(p.Ingress, rule)
	}
	for _, r := range banp.Spec.Egress {
		rule := AdminRule{Name: r.Name, Action: Action(r.Action)}
		for _, peer := range r.To {
			rule.Peers = append(rule.Peers, egressPeer(peer.Namespaces, peer.Pods, peer.Nodes, peer.Networks))
		}
		rule.Ports, rule.AllPorts = portsOf(r.Ports)
		p.Egress = append(p.Egress, rule)
	}
	return p
}

// unsupportedDomainNames names an egress peer's domainNames, which tabby does not enforce.
func unsupportedDomainNames[D ~string](rule, peer int, names []D) string {
	return fmt.Sprintf("spec.egress[%d].to[%d].domainNames %q: not supported; the peer matches nothing", rule, peer, names)
}

func subjectOf(s anpv1alpha1.AdminNetworkPolicySubject) AdminSubject {
	return AdminSubject{Namespaces: s.Namespaces, Pods: namespacedPods(s.Pods)}
}

func namespacedPods(p *anpv1alpha1.NamespacedPod) *NamespacedPods {
	if p == nil {
		return nil
	}
	return &NamespacedPods{NamespaceSelector: p.NamespaceSelector, PodSelector: p.PodSelector}
}

func egressPeer(ns *metav1.LabelSelector, pods *anpv1alpha1.NamespacedPod, nodes *metav1.LabelSelector, networks []anpv1alpha1.CIDR) AdminPeer {
	out := AdminPeer{Namespaces: ns, Pods: namespacedPods(pods), Nodes: nodes}
	for _, n := range networks {
		out.Networks = append(out.Networks, string(n))
	}
	return out
}

func portsOf(ports *[]anpv1alpha1.AdminNetworkPolicyPort) ([]AdminPort, bool) {
	if ports == nil {
		return nil, true
	}
	out := []AdminPort{}
	for _, p := range *ports {
		switch {
		case p.PortNumber != nil:
			out = append(out, AdminPort{Protocol: Protocol(p.PortNumber.Protocol), Port: p.PortNumber.Port})
		case p.PortRange != nil:
			out = append(out, AdminPort{Protocol: Protocol(p.PortRange.Protocol), Port: p.PortRange.Start, EndPort: p.PortRange.End})
		case p.NamedPort != nil:
			out = append(out, AdminPort{Name: *p.NamedPort})
		default:
			// Fails closed: an entry with nothing set matches no port.
			out = append(out, AdminPort{})
		}
	}
	return out, false
}

// Node is what policy needs of a node: its labels and addresses (a nodes peer matches them).
type Node struct {
	Name   string
	Labels map[string]string
	IPs    []netip.Addr
}

// compiledAdmin is one admin policy compiled; like compiledPolicy it never changes.
type compiledAdmin struct {
	key      AdminKey
	tier     Tier
	src      *AdminPolicy
	subject  *podSelection // nil: selects no pod
	rules    [2][]adminRule
	problems []string
}

type adminRule struct {
	index  int
	name   string
	action Action
	compiledRule
}

// compareAdmins orders admin policies as they are evaluated: by tier, by priority, lower
// first, and policies of equal priority by kind and name. The API leaves the order of two
// policies of one priority to the implementation; this one is the same on every node and
// after every restart.
func compareAdmins(a, b *compiledAdmin) int {
	return cmp.Or(cmp.Compare(a.tier, b.tier), cmp.Compare(a.src.Priority, b.src.Priority),
		strings.Compare(a.key.Kind, b.key.Kind), strings.Compare(a.key.Name, b.key.Name))
}

func (cp *compiledAdmin) problemf(format string, args ...any) {
	cp.problems = append(cp.problems, fmt.Sprintf("%s: ", cp.key)+fmt.Sprintf(format, args...))
}

func compileAdmin(p *AdminPolicy) *compiledAdmin {
	cp := &compiledAdmin{key: p.Key(), tier: p.Tier, src: p}
	for _, u := range p.Unsupported {
		cp.problemf("%s", u)
	}
	switch {
	case p.Subject.Namespaces != nil && p.Subject.Pods == nil:
		if s, err := selectionOf(p.Subject.Namespaces, nil); err != nil {
			cp.problemf("spec.subject.namespaces: %v; the policy selects no pod", err)
		} else {
			cp.subject = s
		}
	case p.Subject.Pods != nil && p.Subject.Namespaces == nil:
		if s, err := selectionOf(&p.Subject.Pods.NamespaceSelector, &p.Subject.Pods.PodSelector); err != nil {
			cp.problemf("spec.subject.pods: %v; the policy selects no pod", err)
		} else {
			cp.subject = s
		}
	default:
		cp.problemf("spec.subject: exactly one of namespaces and pods must be set; the policy selects no pod")
	}
	for d, rules := range [2][]AdminRule{p.Ingress, p.Egress} {
		peersField := "from"
		if direction(d) == egress {
			peersField = "to"
		}
		for i := range rules {
			field := fmt.Sprintf("spec.%s[%d]", direction(d), i)
			cp.rules[d] = append(cp.rules[d], cp.compileRule(field, peersField, i, &rules[i]))
		}
	}
	return cp
}

func (cp *compiledAdmin) compileRule(field, peersField string, i int, r *AdminRule) adminRule {
	out := adminRule{index: i, name: r.Name, action: r.Action}
	out.allPorts = r.AllPorts
	switch r.Action {
	case ActionAllow, ActionDeny:
	case ActionPass:
		// A ClusterNetworkPolicy of the Baseline tier may pass (to the default: allowed).
		if cp.key.Kind == KindBANP {
			cp.problemf("%s.action: Pass is not a baseline action; the rule matches nothing", field)
			out.action = ""
		}
	default:
		cp.problemf("%s.action: unknown action %q; the rule matches nothing", field, r.Action)
		out.action = ""
	}
	for j, peer := range r.Peers {
		pf := fmt.Sprintf("%s.%s[%d]", field, peersField, j)
		if peer.empty() && (out.action == ActionDeny || out.action == ActionPass) {
			// The API's "fail closed" for a peer with no field this version knows: a Deny or
			// Pass rule denies everything (an Allow rule's peer matches nothing, below).
			cp.problemf("%s: no field set (a newer API's peer?); the %s rule denies everything", pf, out.action)
			out.action = ActionDeny
			out.compiledRule = compiledRule{allPeers: true, allPorts: true}
			return out
		}
		out.peers = append(out.peers, cp.compilePeer(pf, &peer)...)
	}
	for j, port := range r.Ports {
		ps, err := compileAdminPort(port)
		if err != nil {
			cp.problemf("%s.ports[%d]: %v; the port matches nothing", field, j, err)
			continue
		}
		out.ports = append(out.ports, ps...)
	}
	return out
}

func (cp *compiledAdmin) compilePeer(field string, p *AdminPeer) []peer {
	if p.Unsupported {
		return nil
	}
	set := 0
	for _, b := range []bool{p.Namespaces != nil, p.Pods != nil, p.Nodes != nil, len(p.Networks) > 0} {
		if b {
			set++
		}
	}
	if set != 1 {
		cp.problemf("%s: exactly one of namespaces, pods, nodes and networks must be set; the peer matches nothing", field)
		return nil
	}
	switch {
	case p.Namespaces != nil:
		s, err := selectionOf(p.Namespaces, nil)
		if err != nil {
			cp.problemf("%s.namespaces: %v; the peer matches nothing", field, err)
			return nil
		}
		return []peer{{kind: peerPods, pods: *s}}
	case p.Pods != nil:
		s, err := selectionOf(&p.Pods.NamespaceSelector, &p.Pods.PodSelector)
		if err != nil {
			cp.problemf("%s.pods: %v; the peer matches nothing", field, err)
			return nil
		}
		return []peer{{kind: peerPods, pods: *s}}
	case p.Nodes != nil:
		sel, err := metav1.LabelSelectorAsSelector(p.Nodes)
		if err != nil {
			cp.problemf("%s.nodes: %v; the peer matches nothing", field, err)
			return nil
		}
		n := nodeSelection{sel: sel, id: "nodes=" + strconv.Quote(sel.String())}
		for _, fam := range ipfamily.All {
			n.setName.Set(fam, setName(setKindNodes, fam, n.id))
		}
		return []peer{{kind: peerNodes, nodes: n}}
	}
	var out []peer
	for k, n := range p.Networks {
		b, err := compileIPBlock(&networkingv1.IPBlock{CIDR: n})
		if err != nil {
			cp.problemf("%s.networks[%d]: %v; the network matches nothing", field, k, err)
			continue
		}
		out = append(out, peer{kind: peerBlock, block: b})
	}
	return out
}

// selectionOf is the pods of the namespaces nsSel selects that podSel (nil: every pod) selects.
// Its identity is a NetworkPolicy peer's with both selectors, so the two share a set.
func selectionOf(nsSel, podSel *metav1.LabelSelector) (*podSelection, error) {
	ns, err := metav1.LabelSelectorAsSelector(nsSel)
	if err != nil {
		return nil, fmt.Errorf("namespaceSelector: %w", err)
	}
	s := &podSelection{nsSel: ns, podSel: labels.Everything()}
	if podSel != nil {
		if s.podSel, err = metav1.LabelSelectorAsSelector(podSel); err != nil {
			return nil, fmt.Errorf("podSelector: %w", err)
		}
	}
	s.id = "nssel=" + strconv.Quote(ns.String()) + " pods=" + strconv.Quote(s.podSel.String())
	for _, fam := range ipfamily.All {
		s.setName.Set(fam, setName(setKindPods, fam, s.id))
	}
	return s, nil
}

// compileAdminPort compiles a port entry; a named port, which has no protocol in this API,
// is the name's port of each protocol (TCP, UDP) the pod defines it for.
func compileAdminPort(p AdminPort) ([]portSpec, error) {
	if p.Name != "" {
		var out []portSpec
		for _, proto := range []Protocol{Protocol(corev1.ProtocolTCP), Protocol(corev1.ProtocolUDP)} {
			ps := portSpec{proto: proto, kind: portNamed, name: p.Name}
			for _, fam := range ipfamily.All {
				ps.setName.Set(fam, namedPortSetName(ps.name, ps.proto, fam))
			}
			out = append(out, ps)
		}
		return out, nil
	}
	proto := p.Protocol
	if proto == "" {
		proto = Protocol(corev1.ProtocolTCP)
	}
	ps := portSpec{proto: proto, kind: portRange}
	if _, ok := iptablesProtocol(proto); !ok {
		return nil, fmt.Errorf("protocol %q: not TCP, UDP or SCTP", proto)
	}
	if p.AllOfProtocol {
		ps.kind = portAll
		return []portSpec{ps}, nil
	}
	from, to := p.Port, p.Port
	if p.EndPort != 0 {
		to = p.EndPort
	}
	if from < 1 || from > 65535 {
		return nil, fmt.Errorf("port %d: not in 1-65535", from)
	}
	if to < from || to > 65535 {
		return nil, fmt.Errorf("end %d: not in %d-65535", to, from)
	}
	ps.from, ps.to = uint16(from), uint16(to)
	return []portSpec{ps}, nil
}

// selects tells whether the policy's subject is pod.
func (cp *compiledAdmin) selects(pod *Pod, nsLabels func(string) labels.Set) bool {
	return cp.subject != nil && cp.subject.selects(pod, nsLabels)
}

// nodeSelection is a nodes peer: the addresses of the nodes sel selects.
type nodeSelection struct {
	sel     labels.Selector
	id      string
	setName ipfamily.Pair[string]
}

// nodeMembers is the hash:ip members of the nodes sel selects, in family fam.
func nodeMembers(nodes map[string]*Node, sel labels.Selector, fam ipfamily.Family) []string {
	var out []string
	for _, n := range nodes {
		if n != nil && sel.Matches(labels.Set(n.Labels)) {
			out = appendAddrMembers(out, n.IPs, fam)
		}
	}
	return sortedMembers(out)
}

// NodeOf is what a nodes peer of an admin policy matches of a node: its labels, its
// InternalIPs and its BGP addresses.
func NodeOf(n model.Node) *Node {
	out := &Node{Name: n.Name, Labels: n.Labels}
	for _, fam := range ipfamily.All {
		if a := n.InternalIP.Get(fam); a.IsValid() {
			out.IPs = append(out.IPs, a)
		}
		if p := n.BGPAddress.Get(fam); p.IsValid() && !slices.Contains(out.IPs, p.Addr()) {
			out.IPs = append(out.IPs, p.Addr())
		}
	}
	return out
}
