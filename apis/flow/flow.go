// Package flow is the flow log record every part of tabby agrees on: felix produces it (a
// connection's packets joined with the policy rule that decided them), tabby-node serves it,
// and tabbyctl and the web view read it. It has no dependencies, so each side can import it.
package flow

import (
	"context"
	"net/netip"
	"strings"
	"time"
)

// Verdict is what policy did with a flow.
type Verdict string

const (
	Allow Verdict = "allow"
	Deny  Verdict = "deny"
)

// Endpoint is one end of a flow: a pod (Namespace and Pod set) or a bare address.
type Endpoint struct {
	Namespace string     `json:"namespace,omitempty"`
	Pod       string     `json:"pod,omitempty"`
	IP        netip.Addr `json:"ip"`
}

// String is NS/POD for a pod, the address otherwise.
func (e Endpoint) String() string {
	if e.Pod != "" {
		return e.Namespace + "/" + e.Pod
	}
	return e.IP.String()
}

// Record is one aggregated flow: the connections from Src to Dst on one port and protocol that
// one policy rule decided the same way, within [Start, End).
type Record struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Node is the node whose felix recorded the flow.
	Node     string   `json:"node"`
	Src      Endpoint `json:"src"`
	Dst      Endpoint `json:"dst"`
	Protocol string   `json:"protocol"` // TCP, UDP, SCTP, ICMP, ICMPv6
	DstPort  uint16   `json:"dstPort,omitempty"`
	Verdict  Verdict  `json:"verdict"`
	// Direction is the side whose policy decided: "ingress" (the destination pod's) or
	// "egress" (the source pod's).
	Direction string `json:"direction"`
	// Rule names the deciding rule the way `tabbyctl policy show` does, e.g.
	// "NetworkPolicy demo/deny-all ingress (no rule matched)",
	// "AdminNetworkPolicy block-db ingress rule 0 \"deny-web\" (Deny)",
	// or "no policy".
	Rule        string `json:"rule"`
	Connections uint64 `json:"connections"` // connections that started in the interval
	Packets     uint64 `json:"packets"`
	Bytes       uint64 `json:"bytes"`
}

// Filter selects records. Zero fields match everything.
type Filter struct {
	// From and To are NS/POD, NS/ (every pod of a namespace) or an address.
	From    string  `json:"from,omitempty"`
	To      string  `json:"to,omitempty"`
	Verdict Verdict `json:"verdict,omitempty"`
	Node    string  `json:"node,omitempty"`
}

// Match tells whether r passes f.
func (f Filter) Match(r Record) bool {
	if f.Verdict != "" && r.Verdict != f.Verdict {
		return false
	}
	if f.Node != "" && r.Node != f.Node {
		return false
	}
	return matchEndpoint(f.From, r.Src) && matchEndpoint(f.To, r.Dst)
}

func matchEndpoint(want string, e Endpoint) bool {
	if want == "" {
		return true
	}
	if ns, pod, ok := strings.Cut(want, "/"); ok {
		return e.Pod != "" && ns == e.Namespace && (pod == "" || pod == e.Pod)
	}
	a, err := netip.ParseAddr(want)
	return err == nil && a == e.IP
}

// Source is a node's flow log.
type Source interface {
	// Flows sends the records it keeps that match f, oldest first; with follow it then sends
	// each new matching record as its interval closes, until ctx is done. It returns send's
	// error, or ctx's when following.
	Flows(ctx context.Context, f Filter, follow bool, send func(Record) error) error
}
