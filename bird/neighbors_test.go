package bird

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/tabbynet/tabby/bird/peers"
)

// fakeBook is a sessionBook with the requests a test sets, recording what it is told.
type fakeBook struct {
	flush, redial map[netip.Addr]bool
	told          []string
}

func (f *fakeBook) takeFlush(addr netip.Addr, _ peers.Peer, _ time.Time) bool {
	v := f.flush[addr]
	delete(f.flush, addr)
	return v
}

func (f *fakeBook) takeRedial(addr netip.Addr) bool {
	v := f.redial[addr]
	delete(f.redial, addr)
	return v
}

func (f *fakeBook) adding(addr netip.Addr) { f.told = append(f.told, "adding "+addr.String()) }
func (f *fakeBook) forget(addr netip.Addr) { f.told = append(f.told, "forget "+addr.String()) }

// TestNeighborReconciler: the speaker's peers follow the desired sessions; a changed session is
// reset, a lost node's routes are flushed, a refusing node is redialled, a session that cannot
// open is not configured, and what failed stays to do.
func TestNeighborReconciler(t *testing.T) {
	a := netip.MustParseAddr
	n2 := peers.Peer{Address: a("198.51.100.2"), ASN: 64512, LocalASN: 64512, Node: "node2", Source: "mesh"}
	n3 := peers.Peer{Address: a("198.51.100.3"), ASN: 64512, LocalASN: 64512, Node: "node3", Source: "mesh"}
	tor := peers.Peer{Address: a("198.51.100.250"), ASN: 65000, LocalASN: 64512, Source: "bgppeer/tor"}
	tor2 := tor
	tor2.ASN = 65001
	torBFD := tor
	torBFD.BFD = peers.BFD{Enabled: true, MinRx: 300 * time.Millisecond, MinTx: 300 * time.Millisecond, Multiplier: 3}
	torNoSecret := tor
	torNoSecret.Err = "password secret missing"
	set := func(ps ...peers.Peer) map[netip.Addr]peers.Peer {
		m := map[netip.Addr]peers.Peer{}
		for _, p := range ps {
			m[p.Address] = p
		}
		return m
	}
	for _, c := range []struct {
		name               string
		configured, wanted map[netip.Addr]peers.Peer
		flush, redial      []netip.Addr
		fail               string
		calls, told        []string
		after              map[netip.Addr]peers.Peer
	}{
		{name: "first sessions", configured: set(), wanted: set(n2, tor),
			calls: []string{"add peer 198.51.100.2", "add peer 198.51.100.250"}, told: []string{"adding 198.51.100.2", "adding 198.51.100.250"},
			after: set(n2, tor)},
		{name: "nothing changed", configured: set(n2, tor), wanted: set(n2, tor), after: set(n2, tor)},
		{name: "a node joins, one leaves", configured: set(n2), wanted: set(n3),
			calls: []string{"delete peer 198.51.100.2", "add peer 198.51.100.3"}, told: []string{"adding 198.51.100.3", "forget 198.51.100.2"},
			after: set(n3)},
		{name: "a BGPPeer changed: its session alone is reset", configured: set(n2, tor), wanted: set(n2, tor2),
			calls: []string{"delete peer 198.51.100.250", "add peer 198.51.100.250"}, told: []string{"adding 198.51.100.250"},
			after: set(n2, tor2)},
		{name: "a BGPPeer's BFD changed: updated in place", configured: set(n2, tor), wanted: set(n2, torBFD),
			calls: []string{"update bfd 198.51.100.250 true"}, after: set(n2, torBFD)},
		{name: "its Secret went: not configured", configured: set(n2, tor), wanted: set(n2, torNoSecret),
			calls: []string{"delete peer 198.51.100.250"}, after: set(n2)},
		{name: "a node lost without notice: flushed", configured: set(n2, n3), wanted: set(n2, n3), flush: []netip.Addr{n3.Address},
			calls: []string{"delete peer 198.51.100.3", "add peer 198.51.100.3"}, told: []string{"adding 198.51.100.3"}, after: set(n2, n3)},
		{name: "a node refused: redialled", configured: set(n2), wanted: set(n2), redial: []netip.Addr{n2.Address},
			calls: []string{"delete peer 198.51.100.2", "add peer 198.51.100.2"}, told: []string{"adding 198.51.100.2"}, after: set(n2)},
		{name: "an addition fails", configured: set(), wanted: set(n2, n3), fail: "add peer 198.51.100.2",
			calls: []string{"add peer 198.51.100.2", "add peer 198.51.100.3"}, told: []string{"adding 198.51.100.2", "adding 198.51.100.3"},
			after: set(n3)},
		{name: "a deletion fails", configured: set(n2, n3), wanted: set(n3), fail: "delete peer",
			calls: []string{"delete peer 198.51.100.2"}, after: set(n2, n3)},
	} {
		t.Run(c.name, func(t *testing.T) {
			spk := newFakeSpeaker()
			if c.fail != "" {
				spk.fail[c.fail] = 1
			}
			book := &fakeBook{flush: map[netip.Addr]bool{}, redial: map[netip.Addr]bool{}}
			for _, a := range c.flush {
				book.flush[a] = true
			}
			for _, a := range c.redial {
				book.redial[a] = true
			}
			r := neighborReconciler{log: testLogger(), configured: c.configured}
			err := r.reconcile(context.Background(), spk, c.wanted, book, time.Now())
			if (err != nil) != (c.fail != "") {
				t.Errorf("error %v", err)
			}
			if got := spk.takeCalls(); !slices.Equal(got, c.calls) {
				t.Errorf("calls %q, want %q", got, c.calls)
			}
			slices.Sort(book.told) // additions come in no particular order
			if !slices.Equal(book.told, c.told) {
				t.Errorf("sessions told %q, want %q", book.told, c.told)
			}
			if len(r.configured) != len(c.after) {
				t.Fatalf("configured %v, want %v", r.configured, c.after)
			}
			for k, v := range c.after {
				if r.configured[k] != v {
					t.Errorf("configured %v, want %v", r.configured, c.after)
				}
			}
		})
	}
}
