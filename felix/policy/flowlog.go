package policy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strconv"
	"strings"
)

// FlowLogGroup is the NFLOG group the policy chains log verdicts to when flow logs are on.
const FlowLogGroup = 40

// FlowLogThreshold is the rules' NFLOG queue threshold: the kernel sends the reader up to that
// many packets in one message (or what it has after the reader's flush timeout) rather than
// one message a packet. A rule's threshold caps the reader's.
const FlowLogThreshold = 32

// FlowLogPrefix starts the NFLOG prefix of every rule the policy chains log. Prefixes hold only
// lower-case letters, digits and dashes, which iptables-save prints unquoted.
const FlowLogPrefix = "tabby-"

// FlowRule is what an NFLOG prefix of the policy chains stands for, when flow logs are on: the
// verdict ("allow" or "deny"), the side whose policy gave it ("ingress" or "egress") and the
// rule's name (DecidingRule.String).
type FlowRule struct {
	Verdict   string
	Direction string
	Text      string
}

// Prefix is the NFLOG prefix of the rules logging r: short (NFLOG allows 64 bytes), the same on
// every node and restart.
func (r FlowRule) Prefix() string {
	sum := sha256.Sum256([]byte(r.Verdict + "\x00" + r.Direction + "\x00" + r.Text))
	return FlowLogPrefix + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:])[:16])
}

// DecidingRule names the rule that decided one side of a new connection, the way
// `tabbyctl policy show` prints it and flow logs record it.
type DecidingRule struct {
	// Kind is NetworkPolicy or an admin policy's kind; "" when no policy decided.
	Kind string
	// Policies is the deciding policy (namespace/name for a NetworkPolicy, the name for an
	// admin policy), or every NetworkPolicy selecting the pod when none of their rules
	// matched.
	Policies  []string
	Direction string
	// Rule indexes spec.ingress or spec.egress; -1 when no rule matched.
	Rule     int
	RuleName string
	Action   Action
}

// NoPolicy is the name of what no policy decided: the direction is open.
const NoPolicy = "no policy"

// String is e.g. `NetworkPolicy demo/web ingress rule 0 (Allow)`,
// `NetworkPolicy demo/deny-all ingress (no rule matched)`,
// `AdminNetworkPolicy block-db ingress rule 0 "deny-web" (Deny)` or `no policy`.
func (r DecidingRule) String() string {
	if r.Kind == "" {
		return NoPolicy
	}
	s := r.Kind + " " + strings.Join(r.Policies, ", ") + " " + r.Direction
	if r.Rule < 0 {
		return s + " (no rule matched)"
	}
	s += " rule " + strconv.Itoa(r.Rule)
	if r.RuleName != "" {
		s += fmt.Sprintf(" %q", r.RuleName)
	}
	return s + " (" + string(r.Action) + ")"
}

// DecidingRule is the rule that decided s, in direction d ("ingress" or "egress").
func (s Side) DecidingRule(d string) DecidingRule {
	switch {
	case s.DecidedBy != nil:
		return adminDecidingRule(d, s.DecidedBy.Policy, s.DecidedBy.Rule, s.DecidedBy.Name, s.DecidedBy.Action)
	case s.AllowedBy != nil:
		return npDecidingRule(d, s.AllowedBy.Policy, s.AllowedBy.Rule)
	case s.Tier == "NetworkPolicy" && !s.Allowed:
		return npDefaultDeny(d, s.Policies)
	}
	return DecidingRule{Direction: d, Rule: -1}
}

func adminDecidingRule(d string, k AdminKey, rule int, name string, a Action) DecidingRule {
	return DecidingRule{Kind: k.Kind, Policies: []string{k.Name}, Direction: d, Rule: rule, RuleName: name, Action: a}
}

func npDecidingRule(d string, k Key, rule int) DecidingRule {
	return DecidingRule{Kind: "NetworkPolicy", Policies: []string{k.String()}, Direction: d, Rule: rule, Action: ActionAllow}
}

func npDefaultDeny(d string, keys []Key) DecidingRule {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.String()
	}
	return DecidingRule{Kind: "NetworkPolicy", Policies: names, Direction: d, Rule: -1, Action: ActionDeny}
}

// flowRuleOf is what the chains log for rule r.
func flowRuleOf(r DecidingRule) FlowRule {
	v := "allow"
	if r.Action == ActionDeny {
		v = "deny"
	}
	return FlowRule{Verdict: v, Direction: r.Direction, Text: r.String()}
}

// nflogLine is the NFLOG rule logging what line (ending in target) matches, under prefix.
func nflogLine(line, target, prefix string) string {
	return strings.TrimSuffix(line, target) + "-j NFLOG --nflog-prefix " + prefix + " --nflog-group " + strconv.Itoa(FlowLogGroup) +
		" --nflog-threshold " + strconv.Itoa(FlowLogThreshold)
}

// SetFlowLogs makes Render log each verdict of the endpoint chains to NFLOG (FlowLogGroup),
// each rule's prefix standing for its DecidingRule (Rendered.FlowRules).
func (c *Calculator) SetFlowLogs(on bool) { c.flowLogs = on }
