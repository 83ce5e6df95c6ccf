package benchutil

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
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
