package speaker

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"time"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// logAdapter sends GoBGP's logs to slog and turns the peer-related ones into PeerLog events:
// GoBGP's API says a session went down, only its log says why (a NOTIFICATION received, a hold
// timer, a connect error), and bird needs the why for status and for graceful restart.
type logAdapter struct {
	log  *slog.Logger
	emit func(Event)
}

func (l *logAdapter) Panic(msg string, f gobgplog.Fields) { l.record(slog.LevelError, msg, f) }
func (l *logAdapter) Fatal(msg string, f gobgplog.Fields) { l.record(slog.LevelError, msg, f) }
func (l *logAdapter) Error(msg string, f gobgplog.Fields) { l.record(slog.LevelError, msg, f) }
func (l *logAdapter) Warn(msg string, f gobgplog.Fields)  { l.record(slog.LevelWarn, msg, f) }
func (l *logAdapter) Info(msg string, f gobgplog.Fields)  { l.record(slog.LevelInfo, msg, f) }
func (l *logAdapter) Debug(msg string, f gobgplog.Fields) { l.record(slog.LevelDebug, msg, f) }

// GoBGP only logs connect failures at debug level, and we want them for status.
func (l *logAdapter) SetLevel(gobgplog.LogLevel)  {}
func (l *logAdapter) GetLevel() gobgplog.LogLevel { return gobgplog.DebugLevel }

func (l *logAdapter) record(level slog.Level, msg string, f gobgplog.Fields) {
	peer, _ := netip.ParseAddr(fmt.Sprint(f["Key"]))
	if level >= slog.LevelWarn || msg == "failed to connect" || msg == "Peer Down" {
		if peer.IsValid() && f["Topic"] == "Peer" {
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
			l.emit(e)
		}
	}
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(f)+1)
	attrs = append(attrs, slog.String("component", "gobgp"))
	for k, v := range f {
		attrs = append(attrs, slog.Any(strings.ToLower(k), v))
	}
	l.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// describe renders a log record for a human reading `tabbyctl node status`.
func describe(msg string, f gobgplog.Fields) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		if k != "Topic" && k != "Key" && k != "State" {
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
