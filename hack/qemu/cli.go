package qemu

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Main is the command line of hack/qemu/run.sh: run.sh [-timeout D] [-env K=V]... SCRIPT [SHAREDIR].
// It streams the guest console to stdout and returns the script's exit status (125 when the
// guest itself failed).
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run.sh", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", DefaultTimeout, "kill the guest after this long")
	mem := fs.Int("m", 1024, "guest memory in MiB")
	var env envFlag
	fs.Var(&env, "env", "K=V exported to the script (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: run.sh [-timeout 5m] [-m 1024] [-env K=V]... SCRIPT [SHAREDIR]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return 2
	}
	opts := Options{Script: fs.Arg(0), ShareDir: fs.Arg(1), Env: env.m, MemoryMB: *mem, Console: stdout}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := Run(ctx, opts)
	var se *ScriptError
	switch {
	case errors.As(err, &se):
		fmt.Fprintf(stderr, "guest script exited %d (guest ran %s)\n", se.ExitCode, res.Boot.Round(time.Millisecond))
		return se.ExitCode
	case err != nil:
		fmt.Fprintln(stderr, err)
		return 125
	}
	fmt.Fprintf(stderr, "guest script exited 0 (guest ran %s)\n", res.Boot.Round(time.Millisecond))
	return 0
}

type envFlag struct{ m map[string]string }

func (e *envFlag) String() string { return "" }

func (e *envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("-env %q: want NAME=VALUE", s)
	}
	if e.m == nil {
		e.m = map[string]string{}
	}
	e.m[k] = v
	return nil
}
