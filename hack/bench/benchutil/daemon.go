package benchutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/proc"
)

// BIRD2 is a reference BIRD2 daemon a benchmark runs in a lab node's namespace. Its files are
// in Dir, named after the node: <node>.conf (the benchmark writes it), .ctl, .pid and .log.
type BIRD2 struct {
	Node *lab.Node
	Dir  string
	p    *proc.Proc
}

// Path is the daemon's file with extension ext (".conf").
func (b *BIRD2) Path(ext string) string { return filepath.Join(b.Dir, b.Node.Name+ext) }

// Start runs bird in the foreground in the node's namespace with the config at Path(".conf").
// The process dies with the benchmark (the lab kills whatever is left in its namespaces too).
func (b *BIRD2) Start() error {
	p, err := proc.Start("BIRD2 at "+b.Node.Name,
		[]string{"ip", "netns", "exec", b.Node.NS, "bird", "-f", "-c", b.Path(".conf"), "-s", b.Path(".ctl"), "-P", b.Path(".pid")},
		proc.Options{Log: b.Path(".log")})
	if err != nil {
		return err
	}
	b.p = p
	return nil
}

// Pid is the daemon's process id, 0 before Start.
func (b *BIRD2) Pid() int {
	if b.p == nil {
		return 0
	}
	return b.p.Pid()
}

// Configure makes the daemon read its config again (`birdc configure`).
func (b *BIRD2) Configure(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "birdc", "-s", b.Path(".ctl"), "configure").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Reconfigured") {
		return fmt.Errorf("birdc configure at %s: %v: %s", b.Node.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// LogTail is "; <node> log: <the last 1,000 bytes of its log>", or "" when there is none: what a
// failure message appends so the daemon's own words come with it.
func (b *BIRD2) LogTail() string {
	out, err := os.ReadFile(b.Path(".log"))
	if err != nil || len(out) == 0 {
		return ""
	}
	return "; " + b.Node.Name + " log: " + strings.TrimSpace(string(out[max(0, len(out)-1000):]))
}

// StopBIRD2 sends every started daemon SIGTERM at once, then waits for each; one still running
// after grace is killed, and said so in the error.
func StopBIRD2(bs []*BIRD2, grace time.Duration) error {
	var ps []*proc.Proc
	for _, b := range bs {
		if b != nil && b.p != nil {
			ps = append(ps, b.p)
		}
	}
	return proc.StopAll(ps, syscall.SIGTERM, grace)
}
