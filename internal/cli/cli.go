// Package cli is what tabby's long-running commands (tabby-node, tabby-typha) share around
// cobra: the exit code and the error line, and the --log-level flag's logger.
package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// Main executes root with args: 0, or 1 after "<command>: <error>" on stderr.
func Main(root *cobra.Command, args []string) int {
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", root.Name(), err)
		return 1
	}
	return 0
}

// Logger is a text logger on stderr at level (debug, info, warn or error); another level is an
// error naming the flag.
func Logger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level=%q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
