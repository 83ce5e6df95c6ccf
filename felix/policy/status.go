package policy

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The conditions tabby writes into the status of an AdminNetworkPolicy, a
// BaselineAdminNetworkPolicy and a ClusterNetworkPolicy. The network-policy-api leaves their
// types to the implementation.
const (
	// ConditionAccepted is True when felix enforces the policy as written, False when it had
	// to leave something out (the message names each field, its value and what felix does
	// instead).
	ConditionAccepted = "Accepted"
	// ConditionPriorityConflict is True when another policy of the same tier has the same
	// priority: the API leaves which one applies first to the implementation.
	ConditionPriorityConflict = "PriorityConflict"

	ReasonAccepted       = "Accepted"
	ReasonUnsupported    = "UnsupportedField"
	ReasonInvalid        = "InvalidField"
	ReasonUniquePriority = "UniquePriority"
	ReasonSamePriority   = "SamePriority"
)

// maxListed bounds the problems and the policies a condition's message names.
const maxListed = 10

// AdminConditions is what tabby says of p in its status, given every admin policy of the
// cluster (p among them or not). It is decided from the same compilation felix enforces, so a
// policy is Accepted exactly when felix left nothing of it out. The conditions carry p's
// generation and no transition time (the writer keeps the one of an unchanged status).
func AdminConditions(p *AdminPolicy, all []*AdminPolicy) []metav1.Condition {
	accepted := metav1.Condition{Type: ConditionAccepted, ObservedGeneration: p.Generation,
		Status: metav1.ConditionTrue, Reason: ReasonAccepted, Message: "enforced by tabby on every node"}
	if problems := compileAdmin(p).problems; len(problems) > 0 {
		reason := ReasonUnsupported
		prefix := p.Key().String() + ": "
		for i, pr := range problems {
			pr = strings.TrimPrefix(pr, prefix)
			if !slices.Contains(p.Unsupported, pr) {
				reason = ReasonInvalid
			}
			problems[i] = pr
		}
		accepted.Status, accepted.Reason = metav1.ConditionFalse, reason
		accepted.Message = "not enforced as written: " + joinListed(problems, "; ")
	}
	conflict := metav1.Condition{Type: ConditionPriorityConflict, ObservedGeneration: p.Generation,
		Status: metav1.ConditionFalse, Reason: ReasonUniquePriority,
		Message: fmt.Sprintf("no other %s policy has priority %d", tierWord(p.Tier), p.Priority)}
	if same := samePriority(p, all); len(same) > 0 {
		conflict.Status, conflict.Reason = metav1.ConditionTrue, ReasonSamePriority
		conflict.Message = fmt.Sprintf("%s also %s priority %d: where more than one matches a connection, "+
			"the API leaves which applies first to the implementation (tabby: by kind, then name); "+
			"give them different priorities", joinListed(same, ", "), haveWord(len(same)), p.Priority)
	}
	return []metav1.Condition{accepted, conflict}
}

// samePriority names the other policies of p's tier with p's priority, in evaluation order.
func samePriority(p *AdminPolicy, all []*AdminPolicy) []string {
	var others []*AdminPolicy
	for _, o := range all {
		if o.Key() != p.Key() && o.Tier == p.Tier && o.Priority == p.Priority {
			others = append(others, o)
		}
	}
	slices.SortFunc(others, func(a, b *AdminPolicy) int {
		return strings.Compare(a.Key().String(), b.Key().String())
	})
	out := make([]string, len(others))
	for i, o := range others {
		out[i] = o.Key().String()
	}
	return out
}

func joinListed(items []string, sep string) string {
	if len(items) <= maxListed {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:maxListed], sep) + fmt.Sprintf("%s(and %d more)", sep, len(items)-maxListed)
}

func tierWord(t Tier) string {
	if t == TierBaseline {
		return "baseline"
	}
	return "admin"
}

func haveWord(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
