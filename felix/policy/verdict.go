package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Explanation is which policies police a pod, per direction. A direction no policy selects
// the pod for is open.
type Explanation struct {
	Pod Key
	// Known is false when the input has no such pod: it is then not policed.
	Known bool
	// HostNetwork pods are never policed.
	HostNetwork bool
	// Ingress and Egress are the policies selecting the pod in that direction, sorted.
	Ingress, Egress []Key
	// AdminIngress and AdminEgress are the admin policies whose subject the pod is and which
	// have rules of that direction, in evaluation order (AdminNetworkPolicies by priority,
	// then the baseline).
	AdminIngress, AdminEgress []AdminKey
}

// Explain says which policies select pod; see Calculator.Explain.
func Explain(in Input, pod Key) Explanation { return NewCalculator(in).Explain(pod) }

// Explain says which policies select pod, per direction.
func (c *Calculator) Explain(pod Key) Explanation {
	e := Explanation{Pod: pod}
	p := c.podByKey[pod]
	if p == nil {
		return e
	}
	e.Known, e.HostNetwork = true, p.HostNetwork
	for _, cp := range c.selecting(p, ingress) {
		e.Ingress = append(e.Ingress, cp.key)
	}
	for _, cp := range c.selecting(p, egress) {
		e.Egress = append(e.Egress, cp.key)
	}
	for _, t := range []Tier{TierAdmin, TierBaseline} {
		for _, a := range c.adminSelecting(p, ingress, t) {
			e.AdminIngress = append(e.AdminIngress, a.key)
		}
		for _, a := range c.adminSelecting(p, egress, t) {
			e.AdminEgress = append(e.AdminEgress, a.key)
		}
	}
	return e
}

// Packet is a new connection's first packet, for Verdict.
type Packet struct {
	Src, Dst netip.Addr
	// Protocol is "TCP", "UDP" or "SCTP"; any other value (e.g. "ICMP") matches only rules
	// that list no ports.
	Protocol Protocol
	// Port is the destination port.
	Port uint16
}

// RuleRef names one rule of a policy: Rule indexes spec.ingress or spec.egress.
type RuleRef struct {
	Policy Key
	Rule   int
}

// Side is the verdict of one end of a packet: the source pod's egress or the destination
// pod's ingress.
type Side struct {
	// Pod is the pod policed at this end; nil when the address is not a pod-network pod (an
	// address outside the cluster, a node, a host-network pod), which is not policed.
	Pod *Key
	// Policies select Pod in this direction; with none, the direction is open.
	Policies  []Key
	Allowed   bool
	AllowedBy *RuleRef
	// Tier is what decided: "AdminNetworkPolicy", "NetworkPolicy",
	// "BaselineAdminNetworkPolicy", or "" (no rule: open).
	Tier string
	// DecidedBy is the admin rule that decided (Tier an admin tier).
	DecidedBy *AdminRuleRef
	// Passed lists the AdminNetworkPolicy Pass rule that sent the packet on, if one did.
	Passed *AdminRuleRef
	Reason string
}

// AdminRuleRef names one rule of an admin policy: Rule indexes spec.ingress or spec.egress.
type AdminRuleRef struct {
	Policy AdminKey
	Tier   Tier
	Rule   int
	Name   string
	Action Action
}

func (r AdminRuleRef) String() string {
	s := r.Policy.String()
	if r.Name != "" {
		s += fmt.Sprintf(" rule %q", r.Name)
	}
	return s
}

// Decision is Verdict's answer.
type Decision struct {
	Allowed bool
	// Reason is one line for humans: the side that denied, or both sides' grounds.
	Reason          string
	Egress, Ingress Side
}

// Verdict evaluates pkt against in directly, from the NetworkPolicy semantics and not from
// rendered rules; see Calculator.Verdict.
func Verdict(in Input, pkt Packet) Decision { return NewCalculator(in).Verdict(pkt) }

// Verdict evaluates whether a new connection's first packet is allowed: by the source pod's
// egress policies and by the destination pod's ingress policies. An address two pods hold (a
// pod being replaced) stands for the first of them by namespace/name when it is the policed
// end, and for any of them as a peer, as an ipset of addresses would.
func (c *Calculator) Verdict(pkt Packet) Decision {
	pkt.Src, pkt.Dst = pkt.Src.Unmap(), pkt.Dst.Unmap()
	pkt.Protocol = Protocol(strings.ToUpper(string(pkt.Protocol)))
	d := Decision{
		Egress:  c.side(egress, pkt),
		Ingress: c.side(ingress, pkt),
	}
	d.Allowed = d.Egress.Allowed && d.Ingress.Allowed
	switch {
	case d.Allowed:
		d.Reason = "allowed: " + d.Egress.Reason + "; " + d.Ingress.Reason
	case !d.Egress.Allowed && !d.Ingress.Allowed:
		d.Reason = "denied: " + d.Egress.Reason + "; " + d.Ingress.Reason
	case !d.Egress.Allowed:
		d.Reason = "denied: " + d.Egress.Reason
	default:
		d.Reason = "denied: " + d.Ingress.Reason
	}
	return d
}

func (c *Calculator) side(d direction, pkt Packet) Side {
	local, word := pkt.Src, "from"
	if d == ingress {
		local, word = pkt.Dst, "to"
	}
	var s Side
	pods := c.podsAt(local)
	if len(pods) == 0 {
		s.Allowed = true
		s.Reason = fmt.Sprintf("%s %s %s: not a pod-network pod, not policed", d, word, local)
		return s
	}
	pod := pods[0]
	k := pod.Key
	s.Pod = &k
	// AdminNetworkPolicies first, by priority: the first rule that matches decides, unless it
	// passes.
	if ref, ok := c.adminDecides(c.adminSelecting(pod, d, TierAdmin), d, pod, pkt); ok {
		if ref.Action != ActionPass {
			return adminSide(s, d, word, k, ref)
		}
		s.Passed = &ref
	}
	pols := c.selecting(pod, d)
	for _, p := range pols {
		s.Policies = append(s.Policies, p.key)
	}
	if len(pols) == 0 {
		if ref, ok := c.adminDecides(c.adminSelecting(pod, d, TierBaseline), d, pod, pkt); ok {
			return adminSide(s, d, word, k, ref)
		}
		s.Allowed = true
		s.Reason = fmt.Sprintf("%s %s %s: no policy selects it", d, word, k)
		if s.Passed != nil {
			s.Reason = fmt.Sprintf("%s %s %s: passed by %s spec.%s[%d], no NetworkPolicy or baseline rule decides", d, word, k, s.Passed.Policy, d, s.Passed.Rule)
		}
		return s
	}
	s.Tier = "NetworkPolicy"
	for _, p := range pols {
		for i, rule := range p.rules[d] {
			if c.ruleAllows(rule, d, pod, pkt) {
				s.Allowed = true
				s.AllowedBy = &RuleRef{Policy: p.key, Rule: i}
				s.Reason = fmt.Sprintf("%s %s %s: allowed by %s spec.%s[%d]", d, word, k, p.key, d, i)
				return s
			}
		}
	}
	list := make([]string, len(s.Policies))
	for i, p := range s.Policies {
		list[i] = p.String()
	}
	s.Reason = fmt.Sprintf("%s %s %s: selected by %s, no rule allows", d, word, k, strings.Join(list, ", "))
	return s
}

// adminDecides is the first rule of pols (in order) in direction d that matches pkt.
func (c *Calculator) adminDecides(pols []*compiledAdmin, d direction, local *Pod, pkt Packet) (AdminRuleRef, bool) {
	for _, p := range pols {
		for _, r := range p.rules[d] {
			if r.action != "" && c.ruleAllows(r.compiledRule, d, local, pkt) {
				return AdminRuleRef{Policy: p.key, Tier: p.tier, Rule: r.index, Name: r.name, Action: r.action}, true
			}
		}
	}
	return AdminRuleRef{}, false
}

func adminSide(s Side, d direction, word string, k Key, ref AdminRuleRef) Side {
	s.Tier = ref.Tier.String()
	s.DecidedBy = &ref
	s.Allowed = ref.Action != ActionDeny
	verb := "allowed"
	if !s.Allowed {
		verb = "denied"
	}
	s.Reason = fmt.Sprintf("%s %s %s: %s by %s spec.%s[%d] (%s)", d, word, k, verb, ref, d, ref.Rule, ref.Action)
	return s
}

// ruleAllows tells whether rule of a policy selecting local (in direction d) allows pkt.
func (c *Calculator) ruleAllows(rule compiledRule, d direction, local *Pod, pkt Packet) bool {
	remote := pkt.Dst
	if d == ingress {
		remote = pkt.Src
	}
	peerOK := rule.allPeers
	for _, p := range rule.peers {
		if peerOK {
			break
		}
		switch p.kind {
		case peerPods:
			peerOK = slices.ContainsFunc(c.podsAt(remote), func(rp *Pod) bool { return c.selectsPod(&p.pods, rp) })
		case peerBlock:
			peerOK = p.block.contains(remote)
		case peerNodes:
			for _, n := range c.nodes {
				if n != nil && p.nodes.sel.Matches(labels.Set(n.Labels)) && slices.Contains(n.IPs, remote) {
					peerOK = true
				}
			}
		}
	}
	if !peerOK {
		return false
	}
	if rule.allPorts {
		return true
	}
	for _, ps := range rule.ports {
		if ps.proto != pkt.Protocol {
			continue
		}
		switch ps.kind {
		case portAll:
			return true
		case portRange:
			if ps.from <= pkt.Port && pkt.Port <= ps.to {
				return true
			}
		case portNamed:
			// Ingress resolves the name on the policed pod, egress on the destination pod.
			owners := []*Pod{local}
			if d == egress {
				owners = c.podsAt(remote)
			}
			for _, o := range owners {
				if slices.Contains(resolveNamedPort(o, ps.name, ps.proto), pkt.Port) {
					return true
				}
			}
		}
	}
	return false
}
