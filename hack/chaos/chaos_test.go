package chaos

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestWindowCounts: a window counts the exchanges begun inside it, a UDP probe answered late is
// lost, a success to the isolated pod is wrongly allowed, and the first success after the last
// failure is what recovery is measured to.
func TestWindowCounts(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	udp := &stream{Name: "udp", Kind: UDPProbes, samples: []sample{
		{at: at(0), ok: true, done: true}, {at: at(20), done: true}, {at: at(40)}, {at: at(60), ok: true, done: true},
		{at: at(5000), ok: true, done: true}, // after the window
	}}
	iso := &stream{Name: "iso", Kind: Isolated, samples: []sample{{at: at(0), done: true}, {at: at(50), ok: true, done: true}}}
	tcp := &stream{Name: "tcp", Kind: TCPFlow, samples: []sample{{at: at(0), ok: true, done: true}}, resets: []time.Time{at(10), at(9000)}}
	m := &Monitor{streams: []*stream{udp, tcp, iso}}
	got, err := m.Window(context.Background(), at(0), at(1000))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]StreamStats{
		"udp": {Exchanges: 4, Failed: 2, FirstBad: at(20), LastBad: at(40), FirstGoodAfter: at(60)},
		"tcp": {Exchanges: 1, Resets: 1},
		"iso": {Exchanges: 2, Allowed: 1, FirstBad: at(50), LastBad: at(50)},
	}
	for _, s := range got {
		w := want[s.Name]
		w.Name, w.Kind = s.Name, s.Kind
		if s != w {
			t.Errorf("%s: %+v, want %+v", s.Name, s, w)
		}
	}
}

// TestMonitorThatDidNotRun: a window with (almost) no exchanges is an error, never "0 lost".
func TestMonitorThatDidNotRun(t *testing.T) {
	stats := []StreamStats{{Name: "udp a→b IPv4", Kind: UDPProbes, Exchanges: 3}, {Name: "isolated", Kind: Isolated, Exchanges: 100}}
	err := CheckRan(stats, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "udp a→b IPv4") || strings.Contains(err.Error(), "isolated") {
		t.Fatalf("checkRan = %v, want an error naming the UDP stream only", err)
	}
	r := Result{Fault: Fault{Name: "f"}, Err: err}
	if r.OK() || !strings.Contains(Table([]Result{r}), "NOT as expected") {
		t.Fatalf("a result of a monitor that did not run reads as expected:\n%s", Table([]Result{r}))
	}
}

// TestFaultsCI is the campaign's subset that `make test` runs: tabby-node SIGKILLed during a
// policy change with the isolated pair probed, and the API server killed and restarted, each
// against its written expectation.
func TestFaultsCI(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, the control plane and the tabby binaries (skipped under -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	faults := Select(Faults(Settings{Rounds: 1}), "control", "during a policy change", "kube-apiserver SIGKILLed")
	if len(faults) != 3 {
		t.Fatalf("selected %d faults, want 3", len(faults))
	}
	rs, err := RunAll(ctx, Options{}, faults)
	t.Logf("\n%s", Table(rs))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		for _, v := range r.Violations() {
			t.Errorf("%s: %s", r.Fault.Name, v)
		}
	}
}
