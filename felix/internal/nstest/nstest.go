// Package nstest gives a test its own network namespace for the iptables and ipset writers:
// tables and sets are per namespace, so what a test writes (and any mistake in the writer)
// never reaches the host's own rules, and everything is gone when the namespace is.
package nstest

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/felix/netnsrun"
)

// NS is a namespace the test made.
type NS struct {
	ns.NetNS
	// Enter runs a function inside the namespace.
	Enter netnsrun.Runner
	// Runner runs commands inside the namespace.
	Runner cmdrun.Runner
}

// Require skips t unless it may make namespaces: root, and not -short.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("netns test skipped in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("netns test needs root")
	}
}

// New makes a namespace, with lo up, removed when t ends (also when it fails).
func New(t testing.TB) *NS {
	t.Helper()
	Require(t)
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("create netns: %v", err)
	}
	t.Cleanup(func() {
		n.Close()
		_ = testutils.UnmountNS(n)
	})
	enter := func(fn func() error) error { return n.Do(func(ns.NetNS) error { return fn() }) }
	x := &NS{NetNS: n, Enter: enter, Runner: cmdrun.InNamespace(enter)}
	x.Exec(t, "ip", "link", "set", "lo", "up")
	return x
}

// Exec runs a command inside the namespace and fails t if it fails.
func (x *NS) Exec(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := x.Runner.Run(context.Background(), name, args, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// Output runs a command inside the namespace and returns its output and error.
func (x *NS) Output(name string, args ...string) (string, error) {
	out, err := x.Runner.Run(context.Background(), name, args, nil)
	return string(out), err
}

// Recorder runs commands through Runner and remembers each, for tests that count what a
// writer ran against the real kernel.
type Recorder struct {
	Runner cmdrun.Runner
	mu     sync.Mutex
	calls  []string // name and arguments
	stdin  []string
}

// Run implements cmdrun.Runner.
func (r *Recorder) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	r.mu.Lock()
	r.calls = append(r.calls, strings.Join(append([]string{name}, args...), " "))
	r.stdin = append(r.stdin, string(stdin))
	r.mu.Unlock()
	return r.Runner.Run(ctx, name, args, stdin)
}

// Take returns the calls since the last Take (commands and their stdin) and forgets them.
func (r *Recorder) Take() (calls, stdin []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls, stdin = r.calls, r.stdin
	r.calls, r.stdin = nil, nil
	return calls, stdin
}
