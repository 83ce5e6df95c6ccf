package server

// Test of tabby's change "A peer's state published before its initial table" (TABBY.md).

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/eapache/channels"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// A path that reaches the RIB while a session's handler is between taking the peer's initial
// table and returning is sent on that session: either in the table or propagated after it.
// Upstream published the Established state only once the handler had returned, and
// propagation skipped the peer meanwhile, so such a path was never sent on that session: at
// route reflectors whose clients come up at once, routes missing on some sessions for good.
// The handler is held after the table is taken (by a peer-state watcher's filter, which it
// calls before returning) while another handler's propagation runs.
func TestPathDuringInitialTableIsSent(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := NewBgpServer(LoggerOption(logger, nil))
	go s.Serve()
	t.Cleanup(s.Stop)
	ctx := context.Background()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 64512, RouterId: "198.51.100.1", ListenPort: -1}}); err != nil {
		t.Fatal(err)
	}
	// A route-reflector client, without its FSM: the test plays the session's moves.
	var p *peer
	if err := s.mgmtOperation(func() error {
		c := &oc.Neighbor{Config: oc.NeighborConfig{NeighborAddress: netip.MustParseAddr("198.51.100.9"), PeerAs: 64512}}
		c.RouteReflector.Config = oc.RouteReflectorConfig{RouteReflectorClient: true, RouteReflectorClusterId: netip.MustParseAddr("198.51.100.1")}
		if err := oc.SetDefaultNeighborConfigValues(c, nil, &s.bgpConfig.Global); err != nil {
			return err
		}
		c.State.RemoteRouterId = c.Config.NeighborAddress // from its OPEN
		p = newPeer(&s.bgpConfig.Global, c, bgp.BGP_FSM_OPENCONFIRM, s.globalRib, s.policy, s.logger)
		s.neighborMap[c.State.NeighborAddress] = p
		return nil
	}, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the server stops: it would stop the FSM this peer has not
		_ = s.mgmtOperation(func() error {
			delete(s.neighborMap, p.fsm.pConf.ReadOnly().State.NeighborAddress)
			return nil
		}, false)
	})
	// As the OPEN exchange leaves it: IPv4 unicast negotiated.
	p.fsm.familyMap.Store(map[bgp.Family]bgp.BGPAddPathMode{bgp.RF_IPv4_UC: bgp.BGP_ADD_PATH_NONE})

	propagate := func(prefix string) {
		s.shared.mu.RLock() // as a peer's handler holds it
		defer s.shared.mu.RUnlock()
		s.propagateUpdate(nil, testPath(t, prefix))
	}
	propagate("10.244.1.0/26") // in the RIB before the session: in its initial table

	// The handler calls the filter of every peer-state watcher before it returns.
	raced := make(chan error, 1)
	w := &watcher{s: s, realCh: make(chan watchEvent, 1), ch: channels.NewInfiniteChannel(), filters: map[watchEventType]func(watchEvent) bool{
		watchEventTypePeerState: func(ev watchEvent) bool {
			if e, ok := ev.(*watchEventPeer); ok && e.State == bgp.BGP_FSM_ESTABLISHED {
				done := make(chan struct{})
				go func() { propagate("10.244.2.0/26"); close(done) }()
				select {
				case <-done:
					raced <- nil
				case <-time.After(30 * time.Second):
					raced <- context.DeadlineExceeded // the propagation waits for this handler
				}
			}
			return false
		},
	}}
	s.watcherMu.Lock()
	s.watcherMap[watchEventTypePeerState] = append(s.watcherMap[watchEventTypePeerState], w)
	s.watcherMu.Unlock()

	s.handleFSMMessage(p, &fsmMsg{
		MsgType:     fsmMsgStateChange,
		MsgData:     bgp.BGP_FSM_ESTABLISHED,
		StateReason: newfsmStateReason(fsmOpenMsgNegotiated, nil, nil),
	})
	p.fsm.state.Store(bgp.BGP_FSM_ESTABLISHED) // as the FSM does once the handler returns
	select {
	case err := <-raced:
		if err != nil {
			t.Fatalf("the propagation did not finish while the handler waited: %v", err)
		}
	default:
		t.Fatal("the handler did not notify the peer-state watchers")
	}

	// What the session's sender would send: what was queued for this session.
	sent := map[string]bool{}
	for _, m := range p.fsm.outgoingCh.take(1 << 20) {
		if m.session != p.fsm.session.Load() {
			continue
		}
		for _, path := range m.Paths {
			if !path.IsWithdraw && !path.IsEOR() {
				sent[path.GetNlri().String()] = true
			}
		}
	}
	for _, prefix := range []string{"10.244.1.0/26", "10.244.2.0/26"} {
		if !sent[prefix] {
			t.Errorf("%s was not queued for the session (queued: %v)", prefix, sent)
		}
	}
}
