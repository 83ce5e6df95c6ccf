package benchutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// Logger is a benchmark's progress log on stderr: warnings only, everything with -v.
func Logger(verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Main ends a lab benchmark's main: a flag error exits 2; otherwise run gets a context that
// Ctrl-C and SIGTERM cancel (its labs are removed on the way out either way), and its error
// exits 1. Messages start with "bench <name>:".
func Main(name string, flagErr error, run func(context.Context) error) {
	if flagErr != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", name, flagErr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", name, err)
		os.Exit(1)
	}
}

// LabFlags are the flags of every benchmark that runs its own lab.
type LabFlags struct {
	Verbose  bool          // -v: log the lab's progress
	TabbyBin string        // -tabby-bin: tabby's binaries
	Hold     time.Duration // -hold-on-failure: keep a failed lab this long
}

// Register adds the flags to the command line's.
func (f *LabFlags) Register() {
	flag.BoolVar(&f.Verbose, "v", false, "log the lab's progress")
	flag.StringVar(&f.TabbyBin, "tabby-bin", os.Getenv("TABBY_BIN"), "directory with tabby-node (default <repo>/bin)")
	flag.DurationVar(&f.Hold, "hold-on-failure", 0, "keep a failed lab this long (for a look at its logs) before removing it")
}

// Lab is o with the binaries and the progress log the flags ask for.
func (f LabFlags) Lab(o lab.Options) lab.Options {
	o.TabbyBin, o.Log = f.TabbyBin, Logger(f.Verbose)
	return o
}

// HoldFailed keeps a failed lab for -hold-on-failure, or until ctx ends (Ctrl-C), after saying
// why and where its state is.
func (f LabFlags) HoldFailed(ctx context.Context, l *lab.Lab, why string) {
	if f.Hold <= 0 || ctx.Err() != nil {
		return
	}
	fmt.Fprintf(os.Stderr, "%s\nlab %s kept for %v (state in %s; Ctrl-C removes it)\n", why, l.ID, f.Hold, l.Dir)
	select {
	case <-ctx.Done():
	case <-time.After(f.Hold):
	}
}

// NeedRoot is nil for root, else the error of a lab benchmark run without it; target is the
// make target that runs it.
func NeedRoot(target string) error {
	if os.Geteuid() == 0 {
		return nil
	}
	return errors.New("needs root (network namespaces): run as root or through `make " + target + "`")
}

// Ms is d in milliseconds, as the tables print it.
func Ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// Verdict is a target's column: ok or MISSED.
func Verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}
