package server

// Tests of tabby's changes to GoBGP (TABBY.md).

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// The hold timer measures the peer, not us: while the receiver is busy with an earlier message
// (its callback waits, as for the server's lock) and the peer's keepalives wait unread in the
// socket, the session stays up; once the peer goes quiet, the hold timer still ends it.
// Upstream ended it after the hold time whatever the peer had sent meanwhile.
func TestHoldTimerWaitsForABusyReceiver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() { _, _ = io.Copy(io.Discard, peer) }() // our keepalives

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)
	conf := f.pConf.ReadCopy()
	conf.Timers.State.NegotiatedHoldTime = 1
	f.pConf.Update(&conf)
	f.conn = conn
	release := make(chan struct{})
	h := &fsmHandler{fsm: f, outgoing: f.outgoingCh, callback: func(*fsmMsg) { <-release }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type end struct {
		state  bgp.FSMState
		reason *fsmStateReason
	}
	ended := make(chan end, 1)
	go func() {
		s, r := h.established(ctx)
		ended <- end{s, r}
	}()

	send := func(typ uint8, body []byte) {
		t.Helper()
		msg := make([]byte, bgp.BGP_HEADER_LENGTH, bgp.BGP_HEADER_LENGTH+len(body))
		for i := range 16 {
			msg[i] = 0xff
		}
		msg[16], msg[17], msg[18] = 0, byte(len(msg)+len(body)), typ
		if _, err := peer.Write(append(msg, body...)); err != nil {
			t.Fatal(err)
		}
	}
	keepalives := func(d time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			send(bgp.BGP_MSG_KEEPALIVE, nil)
			select {
			case e := <-ended:
				t.Fatalf("session ended while the peer sent keepalives: %v", e.reason)
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
	send(bgp.BGP_MSG_UPDATE, []byte{0, 0, 0, 0}) // End-of-RIB: the receiver is busy with it
	keepalives(3 * time.Second)                  // three hold times, unread
	close(release)
	keepalives(2 * time.Second) // read now
	select {
	case e := <-ended:
		if e.reason.Type != fsmHoldTimerExpired {
			t.Fatalf("session ended by %v, want the hold timer", e.reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hold timer did not end a session whose peer went quiet")
	}
}
