package bird

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// peersCounter is a speaker whose one peer is up and never sends End-of-RIB; it counts the
// Peers calls (GoBGP's ListPeer, which takes the server's exclusive lock).
type peersCounter struct {
	speaker.Speaker
	calls atomic.Int32
}

func (p *peersCounter) Peers(context.Context) ([]speaker.PeerState, error) {
	p.calls.Add(1)
	return []speaker.PeerState{{Address: netip.MustParseAddr("198.51.100.12"), State: "established"}}, nil
}

// A sync that takes long polls the speaker ever less often, not every 50 ms.
func TestWaitSyncedBacksOff(t *testing.T) {
	addr := netip.MustParseAddr("198.51.100.12")
	spk := &peersCounter{}
	b := &Bird{log: slog.Default(), spk: spk, started: time.Now(),
		desired: map[netip.Addr]peers.Peer{addr: {Address: addr}}, configuredN: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := b.WaitSynced(ctx, time.Second); err == nil {
		t.Fatal("WaitSynced returned without the peer's End-of-RIB")
	}
	// 50, 100, 200, 400, 800 ms, then every second: 7 or 8 calls in 3 s (60 at a fixed 50 ms).
	if n := spk.calls.Load(); n < 4 || n > 9 {
		t.Fatalf("%d Peers calls in 3 s, want 4..9", n)
	}
}
