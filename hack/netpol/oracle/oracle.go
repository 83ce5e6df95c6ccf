package main

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Input is what the oracle reads: the cluster as policy sees it, and the connections to judge.
type Input struct {
	Policies []networkingv1.NetworkPolicy `json:"policies"`
	// Namespaces are every namespace's labels, as the API server holds them (with
	// kubernetes.io/metadata.name, which the server sets).
	Namespaces map[string]map[string]string `json:"namespaces"`
	Pods       []Pod                        `json:"pods"`
	Probes     []Probe                      `json:"probes"`
}

// Pod is one pod: its labels, address and the container ports a named policy port resolves to.
type Pod struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
	IP        string            `json:"ip"`
	Ports     []Port            `json:"ports"`
}

// Port is a container port.
type Port struct {
	Name     string          `json:"name"`
	Port     int             `json:"port"`
	Protocol corev1.Protocol `json:"protocol"`
}

// Probe is one connection: from a pod ("namespace/name") or an address outside the cluster, to a
// pod, on a port and protocol.
type Probe struct {
	From     string          `json:"from"`
	To       string          `json:"to"`
	Port     int             `json:"port"`
	Protocol corev1.Protocol `json:"protocol"`
}

// Verdict is the oracle's answer for one probe.
type Verdict struct {
	Allowed bool `json:"allowed"`
	Ingress bool `json:"ingress"` // the destination's ingress policies admit it
	Egress  bool `json:"egress"`  // the source's egress policies let it out
	// Why names the policies that decided, e.g. "ingress denied: x/a is selected by
	// x/deny-all, none allows".
	Why string `json:"why"`
}

// Output is the oracle's answer: one verdict per probe, in order.
type Output struct {
	Verdicts []Verdict `json:"verdicts"`
}

// Evaluate judges every probe of in with cyclonus's matcher. Label selectors are evaluated by
// apimachinery first (see selectors.go); everything else — which selector applies where, the
// policy namespace as default peer namespace, ports, named ports, port ranges, ipBlocks, the
// union of policies — is cyclonus's.
func Evaluate(in Input) (out Output, err error) {
	pods := map[string]*Pod{}
	for i := range in.Pods {
		p := &in.Pods[i]
		key := p.Namespace + "/" + p.Name
		if _, dup := pods[key]; dup {
			return out, fmt.Errorf("pod %s listed twice", key)
		}
		if _, err := netip.ParseAddr(p.IP); err != nil {
			return out, fmt.Errorf("pod %s: ip %q: %w", key, p.IP, err)
		}
		if _, ok := in.Namespaces[p.Namespace]; !ok {
			return out, fmt.Errorf("pod %s: namespace %q not in namespaces", key, p.Namespace)
		}
		pods[key] = p
	}
	policies := make([]*networkingv1.NetworkPolicy, len(in.Policies))
	for i := range in.Policies {
		policies[i] = defaulted(&in.Policies[i])
	}
	world, err := rewriteSelectors(policies, in.Namespaces, in.Pods)
	if err != nil {
		return out, err
	}
	// cyclonus panics on input it finds invalid (a port range with a named start, a CIDR that
	// does not parse); the oracle turns that into an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cyclonus rejected the input: %v", r)
		}
	}()
	pol := matcher.BuildNetworkPolicies(false, world.policies)
	for i, pr := range in.Probes {
		tr, err := world.traffic(pods, pr)
		if err != nil {
			return out, fmt.Errorf("probe %d (%s -> %s %d/%s): %w", i, pr.From, pr.To, pr.Port, pr.Protocol, err)
		}
		res := pol.IsTrafficAllowed(tr)
		out.Verdicts = append(out.Verdicts, Verdict{
			Allowed: res.IsAllowed(),
			Ingress: res.Ingress.IsAllowed(),
			Egress:  res.Egress.IsAllowed(),
			Why:     why(pr, res),
		})
	}
	return out, nil
}

// defaulted applies the API server's defaulting of policyTypes (Ingress always, Egress when
// there are egress rules), which cyclonus requires to be done: it panics on an empty list.
func defaulted(p *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	if len(p.Spec.PolicyTypes) > 0 {
		return p
	}
	c := p.DeepCopy()
	c.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	if len(c.Spec.Egress) > 0 {
		c.Spec.PolicyTypes = append(c.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	return c
}

// traffic builds cyclonus's description of a probe. The destination's container port with the
// probe's number and protocol gives the name a named policy port is compared with.
func (w *world) traffic(pods map[string]*Pod, pr Probe) (*matcher.Traffic, error) {
	switch pr.Protocol {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
	default:
		return nil, fmt.Errorf("protocol %q: want TCP, UDP or SCTP", pr.Protocol)
	}
	if pr.Port < 1 || pr.Port > 65535 {
		return nil, fmt.Errorf("port %d out of range", pr.Port)
	}
	dst, ok := pods[pr.To]
	if !ok {
		return nil, fmt.Errorf("destination %q: no such pod", pr.To)
	}
	var src *matcher.TrafficPeer
	if a, err := netip.ParseAddr(pr.From); err == nil {
		src = &matcher.TrafficPeer{IP: a.String()}
	} else if p, ok := pods[pr.From]; ok {
		src = w.peer(p)
	} else {
		return nil, fmt.Errorf("source %q: neither an address nor a pod", pr.From)
	}
	name := ""
	for _, cp := range dst.Ports {
		if cp.Port != pr.Port || cp.Protocol != pr.Protocol || cp.Name == "" {
			continue
		}
		if name != "" && name != cp.Name {
			// Which name a rule means would then depend on the rule: the oracle does not guess.
			return nil, fmt.Errorf("pod %s names port %d/%s twice (%s, %s)", pr.To, pr.Port, pr.Protocol, name, cp.Name)
		}
		name = cp.Name
	}
	return &matcher.Traffic{
		Source:           src,
		Destination:      w.peer(dst),
		ResolvedPort:     pr.Port,
		ResolvedPortName: name,
		Protocol:         pr.Protocol,
	}, nil
}

func (w *world) peer(p *Pod) *matcher.TrafficPeer {
	return &matcher.TrafficPeer{
		IP: p.IP,
		Internal: &matcher.InternalPeer{
			Namespace:       p.Namespace,
			PodLabels:       w.podLabels[p.Namespace+"/"+p.Name],
			NamespaceLabels: w.nsLabels[p.Namespace],
		},
	}
}

// why summarises which policies decided a verdict.
func why(pr Probe, res *matcher.AllowedResult) string {
	var parts []string
	describe := func(dir, target string, d *matcher.DirectionResult) {
		switch {
		case len(d.AllowingTargets) == 0 && len(d.DenyingTargets) == 0:
			parts = append(parts, dir+" open ("+target+" not selected)")
		case len(d.AllowingTargets) > 0:
			parts = append(parts, dir+" allowed by "+strings.Join(sources(d.AllowingTargets), ","))
		default:
			parts = append(parts, dir+" denied (selected by "+strings.Join(sources(d.DenyingTargets), ",")+"; none allows)")
		}
	}
	describe("egress", pr.From, res.Egress)
	describe("ingress", pr.To, res.Ingress)
	return strings.Join(parts, "; ")
}

func sources(ts []*matcher.Target) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		for _, p := range t.SourceRules {
			k := p.Namespace + "/" + p.Name
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
