package chaos

import (
	"fmt"
	"strings"
	"time"
)

// Result is one fault's measured outcome.
type Result struct {
	Fault Fault
	// Window is how long the measured window lasted; Stats are its per-stream counts.
	Window time.Duration
	Stats  []StreamStats
	// Probes and Lost count the UDP probes of every pair; Resets the long-lived connections'
	// breaks; Connects and Allowed the isolated pairs' connects and those that succeeded.
	Probes, Lost, Resets, Connects, Allowed int
	// Recovery runs from the fault healed to the cluster settled and every flow answering.
	Recovery time.Duration
	// Notes are what the fault itself observed (e.g. how CNI ADDs during an outage ended).
	Notes []string
	// Err is a failure of the harness or of a check inside the fault.
	Err error
}

// Violations are the ways the result breaks the fault's expectation.
func (r Result) Violations() []string {
	var v []string
	if r.Err != nil {
		v = append(v, r.Err.Error())
	}
	if r.Lost > r.Fault.MaxLost {
		v = append(v, fmt.Sprintf("%d probes lost, expected at most %d", r.Lost, r.Fault.MaxLost))
	}
	if r.Resets > r.Fault.MaxResets {
		v = append(v, fmt.Sprintf("%d connections reset, expected at most %d", r.Resets, r.Fault.MaxResets))
	}
	if r.Allowed > 0 {
		v = append(v, fmt.Sprintf("%d connects to the isolated pod succeeded: policy failed open", r.Allowed))
	}
	return v
}

// OK tells whether the fault went as expected.
func (r Result) OK() bool { return len(r.Violations()) == 0 }

// Table is the results as a markdown table: fault | expected | lost | resets | wrongly allowed |
// recovery | verdict, then the notes and violations below it.
func Table(rs []Result) string {
	var b strings.Builder
	b.WriteString("| fault | expected | lost | resets | wrongly allowed | recovery | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		verdict := "as expected"
		if !r.OK() {
			verdict = "**NOT as expected**"
		}
		rec := "—"
		if r.Recovery > 0 {
			rec = r.Recovery.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %s | %d of %d | %d | %d of %d | %s | %s |\n",
			r.Fault.Name, r.Fault.Expected, r.Lost, r.Probes, r.Resets, r.Allowed, r.Connects, rec, verdict)
	}
	for _, r := range rs {
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "\n- %s: %s", r.Fault.Name, n)
		}
		for _, v := range r.Violations() {
			fmt.Fprintf(&b, "\n- %s: NOT as expected: %s", r.Fault.Name, v)
		}
	}
	b.WriteString("\n")
	return b.String()
}
