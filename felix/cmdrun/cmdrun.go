// Package cmdrun is how felix's writers run iptables and ipset: through one small interface,
// so the same writer code drives the real commands inside felix's network namespace and, in unit
// tests, an in-memory kernel (package fakekernel) that records every call.
package cmdrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/tabbynet/tabby/felix/netnsrun"
)

// Runner runs one command with stdin and returns its standard output. A command that ran and
// failed returns an *Error, so callers can read its exit code and message.
type Runner interface {
	Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error)
}

// Error is a command that ran and exited non-zero.
type Error struct {
	Command  string // name and arguments
	ExitCode int
	Stderr   string // trimmed
}

func (e *Error) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("%s: exit status %d", e.Command, e.ExitCode)
	}
	return fmt.Sprintf("%s: exit status %d: %s", e.Command, e.ExitCode, e.Stderr)
}

// Stderr returns the message of a failed command anywhere in err's chain, or "".
func Stderr(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Stderr
	}
	return ""
}

// InNamespace returns a Runner that starts every command inside the namespace ns enters:
// iptables and ipset act on the namespace of the thread that forks them, and netnsrun keeps
// the goroutine on a thread switched into felix's namespace while the child is started.
func InNamespace(ns netnsrun.Runner) Runner {
	if ns == nil {
		ns = netnsrun.Current
	}
	return nsRunner{ns}
}

type nsRunner struct{ ns netnsrun.Runner }

func (r nsRunner) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	err := r.ns(func() error {
		cmd := exec.CommandContext(ctx, name, args...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd.Run()
	})
	if err == nil {
		return stdout.Bytes(), nil
	}
	command := strings.Join(append([]string{name}, args...), " ")
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return stdout.Bytes(), &Error{Command: command, ExitCode: ee.ExitCode(), Stderr: strings.TrimSpace(stderr.String())}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", command, ctx.Err())
	}
	return nil, fmt.Errorf("%s: %w", command, err)
}
