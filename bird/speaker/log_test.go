package speaker

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// GoBGP's debug records reach the handler (connect failures are among them) whatever tabby's
// level; its per-UPDATE records, below debug, only when tabby's logger wants them.
func TestLogHandlerLevels(t *testing.T) {
	trace := slog.LevelDebug - 4
	for _, c := range []struct {
		tabby        slog.Level
		debug, trace bool
	}{
		{slog.LevelInfo, true, false},
		{slog.LevelDebug, true, false},
		{trace, true, true},
	} {
		log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: c.tabby}))
		h := newLogHandler(log, func(Event) {})
		ctx := context.Background()
		if got := h.Enabled(ctx, slog.LevelDebug); got != c.debug {
			t.Errorf("tabby at %v: debug enabled %v, want %v", c.tabby, got, c.debug)
		}
		if got := h.Enabled(ctx, trace); got != c.trace {
			t.Errorf("tabby at %v: below debug enabled %v, want %v", c.tabby, got, c.trace)
		}
	}
}
