package policy

// FlowRule is what an NFLOG prefix of the policy chains stands for, when flow logs are on: the
// verdict ("allow" or "deny"), the side whose policy gave it ("ingress" or "egress") and the
// rule's name as RuleText gives it.
type FlowRule struct {
	Verdict   string
	Direction string
	Text      string
}
