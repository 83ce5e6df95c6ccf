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

// GoBGP's BFD warnings become BFDDown events for their peer; other BFD records do not.
func TestBFDLog(t *testing.T) {
	var got []Event
	h := newLogHandler(slog.New(slog.NewTextHandler(io.Discard, nil)), func(e Event) { got = append(got, e) })
	log := slog.New(h)
	log.Warn(bfdExpired, slog.String("Topic", "bfd"), slog.String("Peer", "198.51.100.1"))
	log.Warn(bfdRemoteDown, slog.String("Topic", "bfd"), slog.String("Peer", "2001:db8::1"))
	log.Info("Insert BFD peer", slog.String("Topic", "bfd"), slog.String("Peer", "198.51.100.1"))
	log.Warn("Can't dial UDP", slog.String("Topic", "bfd"), slog.String("Peer", "198.51.100.1"))
	if len(got) != 2 {
		t.Fatalf("events %+v, want 2", got)
	}
	for i, want := range []string{"198.51.100.1", "2001:db8::1"} {
		if e := got[i]; !e.BFDDown || e.Type != PeerLog || e.Peer.String() != want || e.Message == "" {
			t.Errorf("event %d: %+v, want BFDDown for %s", i, e, want)
		}
	}
}
