package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// FromCNP parses a ClusterNetworkPolicy (policy.networking.k8s.io/v1beta1, the
// network-policy-api's successor of AdminNetworkPolicy and BaselineAdminNetworkPolicy): its
// tier says where it is evaluated, Accept is Allow, and Pass in the Baseline tier skips the
// remaining baseline rules (allowed, unless nothing follows: the default).
func FromCNP(cnp *cnpv1beta1.ClusterNetworkPolicy) *AdminPolicy {
	p := &AdminPolicy{Kind: KindCNP, Tier: TierAdmin, Name: cnp.Name, Priority: cnp.Spec.Priority, ResourceVersion: cnp.ResourceVersion, Generation: cnp.Generation}
	switch cnp.Spec.Tier {
	case cnpv1beta1.AdminTier:
	case cnpv1beta1.BaselineTier:
		p.Tier = TierBaseline
	default:
		p.Unsupported = append(p.Unsupported, fmt.Sprintf("spec.tier: unknown tier %q; the policy selects no pod", cnp.Spec.Tier))
		p.Subject = AdminSubject{}
		return p
	}
	p.Subject = AdminSubject{Namespaces: cnp.Spec.Subject.Namespaces}
	if sp := cnp.Spec.Subject.Pods; sp != nil {
		p.Subject.Pods = &NamespacedPods{NamespaceSelector: sp.NamespaceSelector, PodSelector: sp.PodSelector}
	}
	for _, r := range cnp.Spec.Ingress {
		rule := AdminRule{Name: r.Name, Action: cnpAction(r.Action)}
		for _, peer := range r.From {
			ap := AdminPeer{Namespaces: peer.Namespaces}
			if peer.Pods != nil {
				ap.Pods = &NamespacedPods{NamespaceSelector: peer.Pods.NamespaceSelector, PodSelector: peer.Pods.PodSelector}
			}
			rule.Peers = append(rule.Peers, ap)
		}
		rule.Ports, rule.AllPorts = cnpPorts(r.Protocols)
		p.Ingress = append(p.Ingress, rule)
	}
	for i, r := range cnp.Spec.Egress {
		rule := AdminRule{Name: r.Name, Action: cnpAction(r.Action)}
		for j, peer := range r.To {
			ap := AdminPeer{Namespaces: peer.Namespaces, Nodes: peer.Nodes}
			if len(peer.DomainNames) > 0 {
				p.Unsupported = append(p.Unsupported, unsupportedDomainNames(i, j, peer.DomainNames))
				ap.Unsupported = true
			}
			if peer.Pods != nil {
				ap.Pods = &NamespacedPods{NamespaceSelector: peer.Pods.NamespaceSelector, PodSelector: peer.Pods.PodSelector}
			}
			for _, n := range peer.Networks {
				ap.Networks = append(ap.Networks, string(n))
			}
			rule.Peers = append(rule.Peers, ap)
		}
		rule.Ports, rule.AllPorts = cnpPorts(r.Protocols)
		p.Egress = append(p.Egress, rule)
	}
	return p
}

func cnpAction(a cnpv1beta1.ClusterNetworkPolicyRuleAction) Action {
	if a == cnpv1beta1.ClusterNetworkPolicyRuleActionAccept {
		return ActionAllow
	}
	return Action(a)
}

// cnpPorts is a rule's protocols as port entries: a protocol without a destination port is all
// of its ports.
func cnpPorts(protocols []cnpv1beta1.ClusterNetworkPolicyProtocol) ([]AdminPort, bool) {
	if len(protocols) == 0 {
		return nil, true
	}
	out := []AdminPort{}
	for _, pr := range protocols {
		var proto Protocol
		var dp *cnpv1beta1.Port
		switch {
		case pr.TCP != nil:
			proto, dp = Protocol(corev1.ProtocolTCP), pr.TCP.DestinationPort
		case pr.UDP != nil:
			proto, dp = Protocol(corev1.ProtocolUDP), pr.UDP.DestinationPort
		case pr.SCTP != nil:
			proto, dp = Protocol(corev1.ProtocolSCTP), pr.SCTP.DestinationPort
		case pr.DestinationNamedPort != "":
			out = append(out, AdminPort{Name: pr.DestinationNamedPort})
			continue
		default:
			// Fails closed: an entry with nothing set matches no port.
			out = append(out, AdminPort{})
			continue
		}
		switch {
		case dp == nil:
			out = append(out, AdminPort{Protocol: proto, AllOfProtocol: true})
		case dp.Range != nil:
			out = append(out, AdminPort{Protocol: proto, Port: dp.Range.Start, EndPort: dp.Range.End})
		default:
			out = append(out, AdminPort{Protocol: proto, Port: dp.Number})
		}
	}
	return out, false
}
