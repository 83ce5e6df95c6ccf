package policy

import (
	"fmt"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The chains of the filter table tabby owns (README.md, "Chain layout").
const (
	// ParentChain is the built-in chain that gets the one jump, JumpRule, at position 1.
	ParentChain = "FORWARD"
	// JumpRule is the only rule tabby puts in a chain it does not own.
	JumpRule = "-j " + ChainForward

	ChainForward      = "tabby-FORWARD"
	ChainFromWorkload = "tabby-from-wl-dispatch"
	ChainToWorkload   = "tabby-to-wl-dispatch"
	// FromWorkloadPrefix + interface is a pod's egress chain, ToWorkloadPrefix + interface
	// its ingress chain.
	FromWorkloadPrefix = "tabby-fw-"
	ToWorkloadPrefix   = "tabby-tw-"

	// NamePrefix starts every chain and ipset tabby owns; nothing else is ever touched.
	NamePrefix = "tabby-"
)

// workloads matches every host-side workload interface.
const workloads = names.HostVethPrefix + "+"

// forwardRules is tabby-FORWARD, the same whether or not any policy exists, so the jump from
// FORWARD and this chain never change with policy and only the dispatch chains do.
var forwardRules = []string{
	// Replies and established connections first: a new deny stops new connections at once
	// and leaves existing ones flowing, as Calico does.
	"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
	"-m conntrack --ctstate INVALID -j DROP",
	"-i " + workloads + " -j " + ChainFromWorkload,
	"-o " + workloads + " -j " + ChainToWorkload,
	// What policy let through is accepted here, so a host whose FORWARD policy is DROP still
	// forwards pod traffic.
	"-i " + workloads + " -j ACCEPT",
	"-o " + workloads + " -j ACCEPT",
}

// Compute renders in for one family; see Calculator.Render.
func Compute(in Input, fam ipfamily.Family) Rendered { return NewCalculator(in).Render(fam) }

// Render returns tabby's filter-table chains for family fam and every ipset their rules use.
// tabby-FORWARD and both dispatch chains are always there (the dispatch chains empty while no
// NetworkPolicy exists in the cluster); endpoint chains and sets only while at least one does.
// The rule text is what iptables-save prints back, so a writer can compare it with the
// kernel's as is.
func (c *Calculator) Render(fam ipfamily.Family) Rendered {
	if fam != ipfamily.IPv4 && fam != ipfamily.IPv6 {
		// A programming error: set names and members would be of no family.
		panic(fmt.Sprintf("policy: Render for %v", fam))
	}
	r := &renderer{
		c:   c,
		fam: fam,
		out: Rendered{
			Chains: map[string][]string{ChainForward: append([]string(nil), forwardRules...)},
			IPSets: map[string]IPSet{},
		},
	}
	from, to := []string{}, []string{}
	// With no policy anywhere, every pod is open both ways: no per-endpoint rule is needed,
	// and a pod felix does not know yet must not be dropped either.
	if len(c.policies) > 0 {
		for _, ep := range c.endpoints {
			pod := c.podByKey[ep.Pod]
			from = append(from, r.dispatch(ep.Interface, pod, egress))
			to = append(to, r.dispatch(ep.Interface, pod, ingress))
		}
		// Default drop for a workload not programmed yet, so a new pod gets no traffic
		// before its policy is in place.
		from = append(from, "-i "+workloads+" -j DROP")
		to = append(to, "-o "+workloads+" -j DROP")
	}
	r.out.Chains[ChainFromWorkload] = from
	r.out.Chains[ChainToWorkload] = to
	return r.out
}

type renderer struct {
	c   *Calculator
	fam ipfamily.Family
	out Rendered
}

// dispatch renders the dispatch rule of one endpoint in direction d, and its chain if any
// policy selects the pod in that direction.
func (r *renderer) dispatch(iface string, pod *Pod, d direction) string {
	flag, chain := "-i", FromWorkloadPrefix+iface
	if d == ingress {
		flag, chain = "-o", ToWorkloadPrefix+iface
	}
	pols := r.c.selecting(pod, d)
	if len(pols) == 0 {
		return flag + " " + iface + " -j RETURN"
	}
	var rules []string
	seen := map[string]bool{}
	for _, p := range pols {
		for _, rule := range p.rules[d] {
			for _, line := range r.ruleLines(pod, d, rule) {
				// Identical rules of different policies are kept once: the chain only says
				// what is allowed, not by whom (Explain does).
				if !seen[line] {
					seen[line] = true
					rules = append(rules, line)
				}
			}
		}
	}
	// An allow returns rather than accepts, so a packet between two pods of this node is
	// still checked against the other pod's chain of the other direction.
	r.out.Chains[chain] = append(rules, "-j DROP")
	return flag + " " + iface + " -g " + chain
}

// portMatch is one port entry as rule text: the protocol for -p, the match after the set
// matches, or a named-port set.
type portMatch struct {
	proto string // "" = any protocol
	dport string // "-m tcp --dport 80"
	set   string // "-m set --match-set tabby-n4-… dst,dst"
}

// ruleLines renders one NetworkPolicy rule as the cross product of its peers and ports; none
// when a list is non-empty but nothing in it can match in this family.
func (r *renderer) ruleLines(pod *Pod, d direction, rule compiledRule) []string {
	dir := "src"
	if d == egress {
		dir = "dst"
	}
	var peers []string
	if rule.allPeers {
		peers = []string{""}
	}
	for _, p := range rule.peers {
		switch p.kind {
		case peerPods:
			peers = append(peers, "-m set --match-set "+r.podSet(p.pods)+" "+dir)
		case peerBlock:
			if name, ok := r.blockSet(p.block); ok {
				peers = append(peers, "-m set --match-set "+name+" "+dir)
			}
		}
	}
	var ports []portMatch
	if rule.allPorts {
		ports = []portMatch{{}}
	}
	for _, ps := range rule.ports {
		proto, _ := iptablesProtocol(ps.proto)
		switch ps.kind {
		case portAll:
			ports = append(ports, portMatch{proto: proto})
		case portRange:
			ports = append(ports, portMatch{proto: proto, dport: dportMatch(proto, ps.from, ps.to)})
		case portNamed:
			if d == ingress {
				// Ingress: the name means this pod's own container port.
				for _, n := range resolveNamedPort(pod, ps.name, ps.proto) {
					ports = append(ports, portMatch{proto: proto, dport: dportMatch(proto, n, n)})
				}
				continue
			}
			// Egress: the name means each destination pod's own port, which only a set of
			// (address, protocol:port) can say in one rule.
			ports = append(ports, portMatch{set: "-m set --match-set " + r.namedPortSet(ps.name, ps.proto) + " dst,dst"})
		}
	}
	var out []string
	for _, peer := range peers {
		for _, pm := range ports {
			out = append(out, ruleText(pm.proto, peer, pm.set, pm.dport))
		}
	}
	return out
}

// ruleText joins the parts in the order iptables-save prints them: -p, then the matches in
// the order given, then the target.
func ruleText(proto string, matches ...string) string {
	s := ""
	if proto != "" {
		s = "-p " + proto + " "
	}
	for _, m := range matches {
		if m != "" {
			s += m + " "
		}
	}
	return s + "-j RETURN"
}

func dportMatch(proto string, from, to uint16) string {
	if from == to {
		return fmt.Sprintf("-m %s --dport %d", proto, from)
	}
	return fmt.Sprintf("-m %s --dport %d:%d", proto, from, to)
}
