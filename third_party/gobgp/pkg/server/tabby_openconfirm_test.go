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

// The same from the OPEN exchange on: the peer counts the session up once it has our OPEN and
// KEEPALIVE, while the handler of our move to OpenConfirm may still wait for the server's lock.
func TestKeepalivesWhileOpenConfirmIsHandled(t *testing.T) {
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
	g := &oc.Global{Config: oc.GlobalConfig{As: 65001, RouterId: netip.MustParseAddr("198.51.100.1")}}
	n := &oc.Neighbor{Config: oc.NeighborConfig{PeerAs: 65001, NeighborAddress: netip.MustParseAddr("127.0.0.1")}}
	n.Timers.Config.HoldTime, n.Timers.Config.KeepaliveInterval = 3, 1
	f := newFSM(g, n, bgp.BGP_FSM_OPENSENT, logger)
	f.conn = conn
	f.outgoingConnMgr = &outgoingConnManager{}
	release := make(chan struct{})
	callback := func(m *fsmMsg) {
		if m.MsgType == fsmMsgStateChange && m.MsgData.(bgp.FSMState) == bgp.BGP_FSM_OPENCONFIRM {
			<-release
		}
	}
	var wg sync.WaitGroup
	f.start(&wg, callback)
	defer func() { f.stop(); wg.Wait() }()
	defer close(release)

	open, err := bgp.NewBGPOpenMessage(65001, 3, netip.MustParseAddr("198.51.100.2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := open.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write(b); err != nil { // OPENSENT → OPENCONFIRM
		t.Fatal(err)
	}
	// Our KEEPALIVE for the OPEN, then two more (interval 1 s) while the handler runs.
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got := 0; got < 3; got++ {
		var hdr [bgp.BGP_HEADER_LENGTH]byte
		if _, err := io.ReadFull(peer, hdr[:]); err != nil {
			t.Fatalf("%d keepalives since the OPEN, the handler still running, then: %v", got, err)
		}
		if hdr[18] != bgp.BGP_MSG_KEEPALIVE {
			t.Fatalf("message type %d while the handler runs", hdr[18])
		}
	}
}
