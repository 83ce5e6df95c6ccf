package speaker

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// logHandler is the slog.Handler GoBGP logs through. It passes records on to tabby's logger
// (tagged component=gobgp) and turns the peer-related ones into PeerLog events: GoBGP v4's peer
// event says that a session went down and a reason class (notification-received, read-failed,
// hold-timer-expired), but only its log carries the NOTIFICATION's shutdown communication and
// connect errors, and bird needs both for status and for graceful restart.
type logHandler struct {
	next  slog.Handler
	emit  func(Event)
	attrs []slog.Attr // from WithAttrs: GoBGP's per-peer loggers carry Topic and Key this way
}

func newLogHandler(log *slog.Logger, emit func(Event)) *logHandler {
	return &logHandler{next: log.With("component", "gobgp").Handler(), emit: emit}
}

// Enabled is true at debug and above: GoBGP logs connect failures at debug, and status wants
// them. Below debug, GoBGP logs every UPDATE a session sends or receives, with its NLRI and
// attributes: on a route reflector, building those records for nothing was a visible part of
// its CPU, so they are made only when tabby's logger wants them.
func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || h.next.Enabled(ctx, l)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{next: h.next.WithAttrs(as), emit: h.emit, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{next: h.next.WithGroup(name), emit: h.emit, attrs: h.attrs}
}

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn || r.Message == "failed to connect" || r.Message == "Peer Down" || r.Message == "received notification" {
		f := fields(h.attrs, r)
		if e, ok := peerLog(r.Level, r.Message, f); ok {
			h.emit(e)
		}
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// fields flattens a record's attributes (and the logger's) into name → value.
func fields(pre []slog.Attr, r slog.Record) map[string]any {
	f := make(map[string]any, len(pre)+r.NumAttrs())
	for _, a := range pre {
		f[a.Key] = a.Value.Resolve().Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		f[a.Key] = a.Value.Resolve().Any()
		return true
	})
	return f
}

// peerLog turns a GoBGP log record about a peer into a PeerLog event. Warnings and above are
// always reported; below that, only the three records that explain a session's state.
func peerLog(level slog.Level, msg string, f map[string]any) (Event, bool) {
	if f["Topic"] == "bfd" {
		return bfdLog(level, msg, f)
	}
	peer, _ := netip.ParseAddr(fmt.Sprint(f["Key"]))
	if !peer.IsValid() || f["Topic"] != "Peer" {
		return Event{}, false
	}
	e := Event{Type: PeerLog, Peer: peer, Message: describe(msg, f), Time: time.Now()}
	if msg == "received notification" {
		n := &Notification{}
		n.Code, _ = uint8Field(f["Code"])
		n.Subcode, _ = uint8Field(f["Subcode"])
		if c, ok := f["Communicated-Reason"].(string); ok {
			n.Communication = c
		}
		e.Notification = n
	}
	return e, true
}

// describe renders a log record for a human reading `tabbyctl node status`.
func describe(msg string, f map[string]any) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		if k != "Topic" && k != "Key" && k != "State" && k != "component" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(msg)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", strings.ToLower(k), f[k])
	}
	return b.String()
}

// GoBGP's BFD warnings that precede its reset of the session (pkg/server/bfd_peer.go).
const (
	bfdExpired    = "Expired"
	bfdRemoteDown = "Remote peer signaled BFD down"
)

// bfdLog turns GoBGP's record of a BFD session going down into a PeerLog event with BFDDown:
// GoBGP resets the BGP session right after it, and only this record says BFD did it.
func bfdLog(level slog.Level, msg string, f map[string]any) (Event, bool) {
	peer, _ := netip.ParseAddr(fmt.Sprint(f["Peer"]))
	if !peer.IsValid() || level < slog.LevelWarn || (msg != bfdExpired && msg != bfdRemoteDown) {
		return Event{}, false
	}
	why := "BFD down: no packet from the peer within its detection time"
	if msg == bfdRemoteDown {
		why = "BFD down: the peer said its BFD session is down"
	}
	return Event{Type: PeerLog, Peer: peer, Message: why, BFDDown: true, Time: time.Now()}, true
}
