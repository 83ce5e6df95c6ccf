package policy

import (
	"fmt"
	"slices"

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
	// FromPassPrefix + interface (ToPassPrefix for ingress) is where a pod's chain goes after
	// its AdminNetworkPolicy rules, and where their Pass rules go: NetworkPolicy, then the
	// baseline. It exists only when some AdminNetworkPolicy selects the pod and something
	// follows.
	FromPassPrefix = "tabby-fp-"
	ToPassPrefix   = "tabby-tp-"

	// InputParentChain gets InputJumpRule at position 1: a pod's traffic to its own node
	// (INPUT, not FORWARD) is policed by the admin tiers alone; NetworkPolicy always allows
	// it, as the API says.
	InputParentChain = "INPUT"
	InputJumpRule    = "-j " + ChainInput
	ChainInput       = "tabby-INPUT"
	ChainToHost      = "tabby-wl-to-host-dispatch"
	// ToHostPrefix + interface is a pod's chain for its traffic to its own node,
	// ToHostPassPrefix + interface where its Pass rules go.
	ToHostPrefix     = "tabby-fh-"
	ToHostPassPrefix = "tabby-hp-"

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

// inputRules is tabby-INPUT: what it does not drop returns to the rest of INPUT (the host's
// own firewall), replies and established connections first, untouched.
var inputRules = []string{
	"-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
	"-i " + workloads + " -j " + ChainToHost,
}

// Compute renders in for one family; see Calculator.Render.
func Compute(in Input, fam ipfamily.Family) Rendered { return NewCalculator(in).Render(fam) }

// Render returns tabby's filter-table chains for family fam and every ipset their rules use.
// tabby-FORWARD and both dispatch chains are always there (the dispatch chains empty while no
// NetworkPolicy exists in the cluster); endpoint chains and sets only while at least one does.
// The rule text is what iptables-save prints back, so a writer can compare it with the
// kernel's as is.
func (c *Calculator) Render(fam ipfamily.Family) Rendered {
	checkFamily(fam)
	r := &renderer{
		c:   c,
		fam: fam,
		out: Rendered{
			Chains: map[string][]string{ChainForward: slices.Clone(forwardRules)},
			IPSets: map[string]IPSet{},
		},
	}
	r.out.Chains[ChainInput] = slices.Clone(inputRules)
	host := []string{}
	for _, ep := range c.endpoints {
		pod := c.podByKey[ep.Pod]
		t := hostTiers(tiers{
			admin: c.adminSelecting(pod, egress, TierAdmin),
			np:    c.selecting(pod, egress),
			base:  c.adminSelecting(pod, egress, TierBaseline),
		})
		if t.empty() {
			continue
		}
		for _, ch := range tieredChainsNamed(ToHostPrefix+ep.Interface, ToHostPassPrefix+ep.Interface, pod, egress, t, r) {
			r.out.Chains[ch.name] = ch.rules
		}
		host = append(host, hostDispatchRule(ep.Interface))
	}
	r.out.Chains[ChainToHost] = host
	from, to := []string{}, []string{}
	// With no policy anywhere, every pod is open both ways: no per-endpoint rule is needed,
	// and a pod felix does not know yet must not be dropped either.
	if len(c.policies) > 0 || len(c.admins) > 0 {
		for _, ep := range c.endpoints {
			pod := c.podByKey[ep.Pod]
			from = append(from, r.dispatch(ep.Interface, pod, egress))
			to = append(to, r.dispatch(ep.Interface, pod, ingress))
		}
		from = append(from, dispatchDrop(egress))
		to = append(to, dispatchDrop(ingress))
	}
	r.out.Chains[ChainFromWorkload] = from
	r.out.Chains[ChainToWorkload] = to
	return r.out
}

func checkFamily(fam ipfamily.Family) {
	if fam != ipfamily.IPv4 && fam != ipfamily.IPv6 {
		// A programming error: set names and members would be of no family.
		panic(fmt.Sprintf("policy: Render for %v", fam))
	}
}

// renderer renders a Calculator's chains, computing each set's members from the whole input
// the first time a rule names it.
type renderer struct {
	c   *Calculator
	fam ipfamily.Family
	out Rendered
}

func (r *renderer) logRule(dr DecidingRule) (string, bool) {
	if !r.c.flowLogs {
		return "", false
	}
	fr := flowRuleOf(dr)
	p := fr.Prefix()
	if r.out.FlowRules == nil {
		r.out.FlowRules = map[string]FlowRule{}
	}
	r.out.FlowRules[p] = fr
	return p, true
}

// dispatch renders the dispatch rule of one endpoint in direction d, and its chain if any
// policy selects the pod in that direction.
func (r *renderer) dispatch(iface string, pod *Pod, d direction) string {
	t := tiers{
		admin: r.c.adminSelecting(pod, d, TierAdmin),
		np:    r.c.selecting(pod, d),
		base:  r.c.adminSelecting(pod, d, TierBaseline),
	}
	if t.empty() {
		return dispatchRule(iface, d, false)
	}
	for _, ch := range tieredChains(iface, pod, d, t, r) {
		r.out.Chains[ch.name] = ch.rules
	}
	return dispatchRule(iface, d, true)
}

// The rendering below is shared by the whole calculation (Calculator) and the incremental one
// (State): both produce the same text from the same compiled policies; they differ only in
// how they find which policies select a pod and what a set holds.

// setNamer names the set a rule matches and notes that a chain uses it.
type setNamer interface {
	// podSet is the hash:ip set of the pods s selects.
	podSet(s *podSelection) string
	// blockSet is the hash:net set of b, or false when b matches no address of this family.
	blockSet(b *ipBlock) (string, bool)
	// namedPortSet is the hash:ip,port set of every pod-network pod's port named as ps names
	// it.
	namedPortSet(ps *portSpec) string
	// nodeSet is the hash:ip set of the addresses of the nodes n selects.
	nodeSet(n *nodeSelection) string
	// logRule is the NFLOG prefix of the rules deciding as r says, noting what it stands for;
	// false while flow logs are off (no NFLOG rule is rendered).
	logRule(r DecidingRule) (string, bool)
}

// tiers are what polices one endpoint in one direction, in evaluation order: the
// AdminNetworkPolicies selecting it (by priority), the NetworkPolicies (by key), the baseline.
type tiers struct {
	admin []*compiledAdmin
	np    []*compiledPolicy
	base  []*compiledAdmin
	// npOpen: NetworkPolicy selects the pod but allows everything (its traffic to its own
	// node): the baseline is not reached.
	npOpen bool
}

func (t tiers) empty() bool {
	return len(t.admin) == 0 && len(t.np) == 0 && (len(t.base) == 0 || t.npOpen)
}

// hostTiers is what polices a pod's traffic to its own node, from its egress tiers:
// NetworkPolicy always allows it, so only the admin tier, and the baseline for a pod no
// NetworkPolicy selects for egress.
func hostTiers(egressTiers tiers) tiers {
	t := tiers{admin: egressTiers.admin, base: egressTiers.base, npOpen: len(egressTiers.np) > 0}
	if t.npOpen {
		t.base = nil
	}
	return t
}

// hostDispatchRule sends a pod's traffic to its own node to its chain.
func hostDispatchRule(iface string) string { return "-i " + iface + " -g " + ToHostPrefix + iface }

type chain struct {
	name  string
	rules []string
}

// tieredChains renders the chains of an endpoint policed in direction d (t not empty): its
// chain, and the pass chain when AdminNetworkPolicies select it and something follows them.
// Without admin policies the chain is exactly the NetworkPolicy chain (or the baseline's).
//
//	admin rules     Allow -j RETURN, Deny -j DROP, Pass -g <pass chain>
//	                -g <pass chain>
//	pass chain      NetworkPolicy rules (-j RETURN), then -j DROP, when NetworkPolicy selects
//	                the pod; else the baseline's rules (Allow -j RETURN, Deny -j DROP)
//
// What no rule decides falls off the end: allowed.
func tieredChains(iface string, pod *Pod, d direction, t tiers, sets setNamer) []chain {
	return tieredChainsNamed(endpointChain(iface, d), passChain(iface, d), pod, d, t, sets)
}

// tieredChainsNamed is tieredChains with the chain and its pass chain named.
func tieredChainsNamed(name, passName string, pod *Pod, d direction, t tiers, sets setNamer) []chain {
	var rest []string
	if len(t.np) > 0 {
		rest = chainRules(pod, t.np, d, sets)
	} else if !t.npOpen {
		rest = adminLines(pod, d, t.base, "", sets)
	}
	if len(t.admin) == 0 {
		return []chain{{name, rest}}
	}
	pass := ""
	if len(rest) > 0 {
		pass = passName
	}
	rules := adminLines(pod, d, t.admin, pass, sets)
	if pass == "" {
		return []chain{{name, rules}}
	}
	rules = append(rules, "-g "+pass)
	return []chain{{name, rules}, {pass, rest}}
}

// adminLines renders the rules of admin policies in order; Pass goes to pass ("" : allowed).
// A line identical to an earlier one is left out: the earlier one decides every packet it
// would.
func adminLines(pod *Pod, d direction, pols []*compiledAdmin, pass string, sets setNamer) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range pols {
		for i := range p.rules[d] {
			r := &p.rules[d][i]
			var target string
			switch r.action {
			case ActionAllow:
				target = "-j RETURN"
			case ActionDeny:
				target = "-j DROP"
			case ActionPass:
				target = "-j RETURN"
				if pass != "" {
					target = "-g " + pass
				}
			default:
				continue
			}
			prefix, logged := "", false
			if r.action != ActionPass || p.tier == TierBaseline {
				// An admin Pass decides nothing, what follows it does; a baseline's allows.
				prefix, logged = sets.logRule(adminDecidingRule(d.String(), p.key, r.index, r.name, r.action))
			}
			for _, line := range ruleLinesTo(pod, d, &r.compiledRule, sets, target) {
				if !seen[line] {
					seen[line] = true
					if logged {
						out = append(out, nflogLine(line, target, prefix))
					}
					out = append(out, line)
				}
			}
		}
	}
	return out
}

// passChain is the name of an endpoint's pass chain in direction d.
func passChain(iface string, d direction) string {
	if d == ingress {
		return ToPassPrefix + iface
	}
	return FromPassPrefix + iface
}

// endpointChain is the name of an endpoint's chain in direction d.
func endpointChain(iface string, d direction) string {
	if d == ingress {
		return ToWorkloadPrefix + iface
	}
	return FromWorkloadPrefix + iface
}

// dispatchRule is an endpoint's rule in the dispatch chain of direction d: to its own chain
// when some policy selects its pod in that direction, else back (open).
func dispatchRule(iface string, d direction, policed bool) string {
	flag := "-i "
	if d == ingress {
		flag = "-o "
	}
	if !policed {
		return flag + iface + " -j RETURN"
	}
	return flag + iface + " -g " + endpointChain(iface, d)
}

// dispatchDrop ends a dispatch chain while policy is in force: a workload not programmed yet
// gets no traffic before its policy is in place.
func dispatchDrop(d direction) string {
	if d == ingress {
		return "-o " + workloads + " -j DROP"
	}
	return "-i " + workloads + " -j DROP"
}

// chainRules is the chain of an endpoint whose pod pols (in Key order, at least one) select in
// direction d.
func chainRules(pod *Pod, pols []*compiledPolicy, d direction, sets setNamer) []string {
	var rules []string
	seen := map[string]bool{}
	for _, p := range pols {
		for i := range p.rules[d] {
			prefix, logged := sets.logRule(npDecidingRule(d.String(), p.key, i))
			for _, line := range ruleLines(pod, d, &p.rules[d][i], sets) {
				// Identical rules of different policies are kept once: the chain only says
				// what is allowed, not by whom (Explain does; the first policy's, which
				// Verdict names too, is logged).
				if !seen[line] {
					seen[line] = true
					if logged {
						rules = append(rules, nflogLine(line, "-j RETURN", prefix))
					}
					rules = append(rules, line)
				}
			}
		}
	}
	keys := make([]Key, len(pols))
	for i, p := range pols {
		keys[i] = p.key
	}
	if prefix, logged := sets.logRule(npDefaultDeny(d.String(), keys)); logged {
		rules = append(rules, nflogLine("-j DROP", "-j DROP", prefix))
	}
	// An allow returns rather than accepts, so a packet between two pods of this node is
	// still checked against the other pod's chain of the other direction.
	return append(rules, "-j DROP")
}

// portMatch is one port entry as rule text: the protocol for -p, the match after the set
// matches, or a named-port set.
type portMatch struct {
	proto string // "" = any protocol
	dport string // "-m tcp --dport 80"
	set   string // "-m set --match-set tabby-n4-… dst,dst"
}

// ruleLines renders one NetworkPolicy rule as the cross product of its peers and ports; none
// when a list is non-empty but nothing in it can match in this family. Every set a peer or a
// port names is used, even when the rule renders no line.
func ruleLines(pod *Pod, d direction, rule *compiledRule, sets setNamer) []string {
	return ruleLinesTo(pod, d, rule, sets, "-j RETURN")
}

// ruleLinesTo is ruleLines with the rules' target.
func ruleLinesTo(pod *Pod, d direction, rule *compiledRule, sets setNamer, target string) []string {
	dir := "src"
	if d == egress {
		dir = "dst"
	}
	var peers []string
	if rule.allPeers {
		peers = []string{""}
	}
	for i := range rule.peers {
		p := &rule.peers[i]
		switch p.kind {
		case peerPods:
			peers = append(peers, "-m set --match-set "+sets.podSet(&p.pods)+" "+dir)
		case peerBlock:
			if name, ok := sets.blockSet(&p.block); ok {
				peers = append(peers, "-m set --match-set "+name+" "+dir)
			}
		case peerNodes:
			peers = append(peers, "-m set --match-set "+sets.nodeSet(&p.nodes)+" "+dir)
		}
	}
	var ports []portMatch
	if rule.allPorts {
		ports = []portMatch{{}}
	}
	for i := range rule.ports {
		ps := &rule.ports[i]
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
			ports = append(ports, portMatch{set: "-m set --match-set " + sets.namedPortSet(ps) + " dst,dst"})
		}
	}
	var out []string
	for _, peer := range peers {
		for _, pm := range ports {
			out = append(out, ruleText(pm.proto, target, peer, pm.set, pm.dport))
		}
	}
	return out
}

// ruleText joins the parts in the order iptables-save prints them: -p, then the matches in
// the order given, then the target.
func ruleText(proto, target string, matches ...string) string {
	s := ""
	if proto != "" {
		s = "-p " + proto + " "
	}
	for _, m := range matches {
		if m != "" {
			s += m + " "
		}
	}
	return s + target
}

func dportMatch(proto string, from, to uint16) string {
	if from == to {
		return fmt.Sprintf("-m %s --dport %d", proto, from)
	}
	return fmt.Sprintf("-m %s --dport %d:%d", proto, from, to)
}
