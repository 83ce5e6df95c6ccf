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

// A session's sender sends what was queued for it, whatever an earlier session of the same peer
// left on the outgoing channel (which outlives sessions): upstream queued a stop message there
// when a session ended, and a sender that had already returned on a write error never read it,
// so the next session's sender read it first and returned. That session then sent nothing: at
// 500 route-reflector clients, dozens of sessions never got their initial table.
func TestSenderSendsOnlyItsSession(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)
	h := &fsmHandler{fsm: f, outgoing: f.outgoingCh}

	// Session 1 is over; what it left behind: a path. (The stop message upstream also left
	// there no longer exists: the queue holds routes only.)
	f.session.Store(1)
	f.outgoingCh.push(&fsmOutgoingMsg{Paths: testPath(t, "10.244.1.0/26"), session: 1})
	// Session 2 is up: its initial table.
	f.session.Store(2)
	f.outgoingCh.push(&fsmOutgoingMsg{Paths: testPath(t, "10.244.2.0/26"), session: 2})
	f.outgoingCh.push(&fsmOutgoingMsg{Paths: testPath(t, "10.244.3.0/26"), session: 2})

	local, remote := net.Pipe()
	defer remote.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { _ = h.sendMessageloop(ctx, local, make(chan fsmStateReason, 3), &wg) }()
	defer func() { cancel(); local.Close(); wg.Wait() }()

	got := map[string]bool{}
	_ = remote.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !got["10.244.3.0/26"] {
		var hdr [bgp.BGP_HEADER_LENGTH]byte
		if _, err := io.ReadFull(remote, hdr[:]); err != nil {
			t.Fatalf("session 2 got %v, then: %v", got, err)
		}
		h := &bgp.BGPHeader{}
		if err := h.DecodeFromBytes(hdr[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, int(h.Len)-bgp.BGP_HEADER_LENGTH)
		if _, err := io.ReadFull(remote, body); err != nil {
			t.Fatal(err)
		}
		m, err := bgp.ParseBGPBody(h, body)
		if err != nil {
			t.Fatal(err)
		}
		if u, ok := m.Body.(*bgp.BGPUpdate); ok {
			for _, n := range u.NLRI {
				got[n.NLRI.String()] = true
			}
		}
	}
	if got["10.244.1.0/26"] {
		t.Fatalf("session 2 sent session 1's path: %v", got)
	}
	if !got["10.244.2.0/26"] {
		t.Fatalf("session 2 did not send its first path: %v", got)
	}
}

// A peer's queue hands its sender everything pushed since the last batch, oldest first, up to
// the cap, and keeps its wake-up for the rest; a push never waits for the sender, and nothing
// pushed after the session's FSM stopped is kept.
func TestOutQueue(t *testing.T) {
	q := newOutQueue()
	for i := range 5 {
		q.push(&fsmOutgoingMsg{session: uint64(i)})
	}
	sessions := func(msgs []*fsmOutgoingMsg) (out []uint64) {
		for _, m := range msgs {
			out = append(out, m.session)
		}
		return out
	}
	<-q.ready
	if got := sessions(q.take(3)); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Fatalf("first batch %v, want [0 1 2]", got)
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("no wake-up left for the two messages past the cap")
	}
	if got := sessions(q.take(3)); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("second batch %v, want [3 4]", got)
	}
	q.push(&fsmOutgoingMsg{session: 5})
	q.drain()
	if n := len(q.take(10)); n != 0 {
		t.Fatalf("%d messages after drain", n)
	}
	q.close()
	q.push(&fsmOutgoingMsg{session: 6})
	if n := len(q.take(10)); n != 0 {
		t.Fatalf("%d messages pushed after close kept", n)
	}
}
