package server

// Tests of tabby's changes to GoBGP (TABBY.md).

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// recordingHandler keeps the messages of the records it takes, from the level it is set to.
type recordingHandler struct {
	level slog.Level
	mu    sync.Mutex
	msgs  []string
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) has(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.msgs, msg)
}

// A sent UPDATE is logged below debug: a handler that takes debug records (tabby's does, for
// connect failures) is not handed one record per UPDATE and session.
func TestSentUpdateLoggedBelowDebug(t *testing.T) {
	for _, c := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelDebug, false}, {levelTrace, true}} {
		h := &recordingHandler{level: c.level}
		f := newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, slog.New(h))
		s := &fsmHandler{fsm: f, outgoing: f.outgoingCh}
		f.session.Store(1)
		f.outgoingCh.push(&fsmOutgoingMsg{Paths: testPath(t, "10.244.1.0/26"), session: 1})
		local, remote := net.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { _ = s.sendMessageloop(ctx, local, make(chan fsmStateReason, 3), &wg) }()
		_ = remote.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The whole UPDATE: a pipe's write returns once all of it is read.
		var hdr [bgp.BGP_HEADER_LENGTH]byte
		_, err := io.ReadFull(remote, hdr[:])
		if err == nil {
			_, err = io.ReadFull(remote, make([]byte, int(hdr[16])<<8|int(hdr[17])-bgp.BGP_HEADER_LENGTH))
		}
		cancel()
		local.Close()
		remote.Close()
		wg.Wait() // the sender logs before it takes its next batch: done once it returned
		if err != nil {
			t.Fatalf("no UPDATE sent: %v", err)
		}
		if got := h.has("sent update"); got != c.want {
			t.Errorf("handler at %v: sent update logged %v, want %v", c.level, got, c.want)
		}
	}
}
