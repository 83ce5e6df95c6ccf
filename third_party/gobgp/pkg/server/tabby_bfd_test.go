package server

// Tests of tabby's changes to GoBGP's BFD (TABBY.md, "BFD"). Run by tabby's `make test`.

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bfd"
)

// resetRecorder is the BGP server as BFD sees it: it records the sessions BFD resets.
type resetRecorder struct {
	mu     sync.Mutex
	resets []string
}

func (r *resetRecorder) ResetPeer(_ context.Context, req *api.ResetPeerRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resets = append(r.resets, req.Address)
	return nil
}

func (r *resetRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.resets)
}

func freeUDPPort(t *testing.T) uint16 {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

func waitBFDState(t *testing.T, s *bfdServer, peer netip.Addr, want api.BfdSessionState) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := s.GetPeerState(peer); err == nil && st.state.SessionState == want {
			return
		}
		if time.Now().After(end) {
			st, _ := s.GetPeerState(peer)
			t.Fatalf("BFD session with %s not %v: %+v, server stats %+v", peer, want, st, s.GetServerStats())
		}
	}
}

// Two BFD speakers on one host, each on its own address (127.0.0.1 and 127.0.0.2): each
// listens on its address and sends from it, so both sessions come up. Upstream listened on every
// address with SO_REUSEADDR and sent from the kernel's choice of source: one speaker got the
// other's packets, or packets that seemed to come from itself, and a session never came up.
func TestBFDFromAndToTheSessionAddress(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	port := freeUDPPort(t)
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	cfg := oc.BfdConfig{Enabled: true, Port: port, DesiredMinimumTxInterval: 50000, RequiredMinimumReceive: 50000, DetectionMultiplier: 3}
	ctx := context.Background()
	var servers []*bfdServer
	for _, pair := range [][2]netip.Addr{{a, b}, {b, a}} {
		s := NewBfdServer(&resetRecorder{}, logger)
		t.Cleanup(s.Stop)
		s.listenAddresses = []netip.Addr{pair[0]}
		if err := s.Start(ctx, oc.BfdConfig{Port: port}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddPeer(ctx, pair[1], pair[0], cfg, ""); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	waitBFDState(t, servers[0], b, api.BfdSessionState_BFD_SESSION_STATE_UP)
	waitBFDState(t, servers[1], a, api.BfdSessionState_BFD_SESSION_STATE_UP)
}

// A peer's AdminDown takes the BFD session down and leaves the BGP session alone (RFC 5882
// section 3.2: the peer shut BFD off, the path is fine); its Down after Up resets it. Upstream
// reset the BGP session on AdminDown too, so an operator who shut BFD off on the ToR (FRR's
// `shutdown` in a bfd peer) dropped the session and every route on it.
func TestBFDAdminDownKeepsTheSession(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := &resetRecorder{}
	cfg := oc.BfdConfig{Enabled: true, Port: freeUDPPort(t)}
	p := NewBfdPeer(rec, logger, netip.MustParseAddr("127.0.0.1"), netip.Addr{}, cfg, "")
	t.Cleanup(p.Stop)
	rx := func(state bfd.StateType, yours uint32) {
		t.Helper()
		h := &bfd.BFDHeader{Version: 1, State: state, DetectTimeMultiplier: 3, MyDiscriminator: 7, YourDiscriminator: yours,
			DesiredMinTxInterval: 1000000, RequiredMinRxInterval: 1000000}
		for end := time.Now().Add(5 * time.Second); !p.Rx(h); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the BFD peer takes no packet")
			}
		}
	}
	wait := func(want api.BfdSessionState) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); p.sessionState() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("state %v, want %v", p.sessionState(), want)
			}
		}
	}
	up := func() {
		t.Helper()
		rx(bfd.StateDown, 0)
		wait(api.BfdSessionState_BFD_SESSION_STATE_INIT)
		rx(bfd.StateUp, p.myDiscriminator)
		wait(api.BfdSessionState_BFD_SESSION_STATE_UP)
	}
	up()
	rx(bfd.StateAdminDown, p.myDiscriminator)
	wait(api.BfdSessionState_BFD_SESSION_STATE_DOWN)
	if n := rec.count(); n != 0 {
		t.Fatalf("AdminDown reset the BGP session (%d resets)", n)
	}
	up()
	rx(bfd.StateDown, p.myDiscriminator)
	wait(api.BfdSessionState_BFD_SESSION_STATE_DOWN)
	for end := time.Now().Add(5 * time.Second); rec.count() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("Down after Up: %d resets, want 1", rec.count())
		}
	}
}
