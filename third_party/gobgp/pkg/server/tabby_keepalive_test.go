package server

// Tests of tabby's changes to GoBGP (TABBY.md).

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// A session's keepalives start with it: while the handler of its Established state still
// runs (it builds the initial table under the server's lock), the peer hears from us. Upstream
// sent nothing from the OPEN exchange until the handler returned.
func TestKeepalivesStartWithTheSession(t *testing.T) {
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

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_OPENCONFIRM, logger)
	conf := f.pConf.ReadCopy()
	conf.Timers.Config.HoldTime, conf.Timers.Config.KeepaliveInterval = 3, 1
	conf.Timers.State.NegotiatedHoldTime, conf.Timers.State.KeepaliveInterval = 3, 1
	f.pConf.Update(&conf)
	f.conn = conn
	if f.recvOpen, err = bgp.NewBGPOpenMessage(65001, 3, netip.MustParseAddr("198.51.100.2"), nil); err != nil {
		t.Fatal(err)
	}
	// As after the OPEN exchange: a write deadline that passes while the handler runs.
	_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	// The handler of the Established state does not return (it waits for the server's lock)
	// until the peer has had its keepalives.
	release := make(chan struct{})
	callback := func(m *fsmMsg) {
		if m.MsgType == fsmMsgStateChange && m.MsgData.(bgp.FSMState) == bgp.BGP_FSM_ESTABLISHED {
			<-release
		}
	}
	var wg sync.WaitGroup
	f.start(&wg, callback)
	defer func() { f.stop(); wg.Wait() }()
	defer close(release)

	keepalive := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 19, bgp.BGP_MSG_KEEPALIVE}
	if _, err := peer.Write(keepalive); err != nil { // OPENCONFIRM → ESTABLISHED
		t.Fatal(err)
	}
	// Two keepalives (interval 1 s) while the handler runs, within the hold time and a margin.
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got := 0; got < 2; got++ {
		var hdr [bgp.BGP_HEADER_LENGTH]byte
		if _, err := io.ReadFull(peer, hdr[:]); err != nil {
			t.Fatalf("%d keepalives while the handler runs, then: %v", got, err)
		}
		if hdr[18] != bgp.BGP_MSG_KEEPALIVE {
			t.Fatalf("message type %d while the handler runs", hdr[18])
		}
	}
}
