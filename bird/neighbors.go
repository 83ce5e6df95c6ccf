package bird

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// neighborReconciler keeps the speaker's peers at the desired sessions: it deletes what is gone
// or changed, drops the routes of a tabby node lost without a restart notice, re-adds a node
// that refused our first connection, and adds what is missing. A changed BGPPeer,
// BGPConfiguration or Secret thus resets exactly the sessions whose Peer changed.
type neighborReconciler struct {
	log        *slog.Logger
	configured map[netip.Addr]peers.Peer // sessions configured in the speaker
}

// sessionBook is what the neighbor reconciler asks of the sessions' state, which the speaker's
// events keep (events.go).
type sessionBook interface {
	// takeFlush tells whether the routes of a lost tabby node must go now, and clears the
	// request.
	takeFlush(addr netip.Addr, p peers.Peer, now time.Time) bool
	// takeRedial tells whether a never-established tabby node peer must be re-added now, and
	// clears the request.
	takeRedial(addr netip.Addr) bool
	// adding: the peer is about to be (re)added; its established event may come before AddPeer
	// returns.
	adding(addr netip.Addr)
	// forget: the peer is no longer wanted.
	forget(addr netip.Addr)
}

// reconcile brings the speaker's peers to desired (sessions that cannot open, Err set, are
// not configured).
func (r *neighborReconciler) reconcile(ctx context.Context, spk speaker.Speaker, desired map[netip.Addr]peers.Peer, book sessionBook, now time.Time) error {
	var errs []error
	for _, addr := range sortedAddrs(r.configured) {
		cur := r.configured[addr]
		w, ok := desired[addr]
		if ok && w == cur {
			continue
		}
		if ok && onlyBFDDiffers(cur, w) {
			if err := spk.UpdateBFD(ctx, w); err != nil {
				errs = append(errs, err)
				continue
			}
			r.configured[addr] = w
			r.log.Info(bfdChangedMsg, "peer", addr, "source", w.Source, "bfd", w.BFD.Enabled)
			continue
		}
		if err := spk.DeletePeer(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.configured, addr)
		if ok {
			r.log.Info("BGP peer changed: resetting its session", "peer", addr, "source", w.Source)
		} else {
			book.forget(addr)
			r.log.Info("BGP peer removed", "peer", addr, "source", cur.Source)
		}
	}
	for _, addr := range sortedAddrs(r.configured) {
		p := r.configured[addr]
		if !book.takeFlush(addr, p, now) {
			continue
		}
		// Delete drops every route learned from the peer at once (GoBGP would keep them stale
		// for the whole restart time); the re-added peer reconnects when it is back.
		if p.Node != "" {
			r.log.Warn("BGP session with a tabby node lost without a graceful restart notice: dropping its routes",
				"peer", addr, "node", p.Node)
		} else {
			r.log.Warn("BGP router declared down by BFD: dropping its routes", "peer", addr)
		}
		if err := spk.DeletePeer(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.configured, addr)
	}
	for _, addr := range sortedAddrs(r.configured) {
		if !book.takeRedial(addr) {
			continue
		}
		if err := spk.DeletePeer(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.configured, addr)
	}
	// In map order on purpose: two route reflectors that added their clients in the same order
	// would send every reflected update to them in that order too, and the same clients would
	// be the last to get it from both.
	for addr, p := range desired {
		if _, ok := r.configured[addr]; ok || p.Err != "" {
			continue
		}
		book.adding(addr)
		if err := spk.AddPeer(ctx, p); err != nil {
			errs = append(errs, err)
			continue
		}
		r.configured[addr] = p
		r.log.Info("BGP peer added", "peer", addr, "port", p.Port, "asn", p.ASN, "type", p.Type, "source", p.Source)
	}
	return errors.Join(errs...)
}

// bfdChangedMsg is logged when a session's BFD changed in place.
const bfdChangedMsg = "BGP peer's BFD changed: BGP session kept"

// onlyBFDDiffers tells two configurations of one session apart by their BFD alone, which
// the speaker changes without a reset.
func onlyBFDDiffers(a, b peers.Peer) bool {
	a.BFD = b.BFD
	return a == b
}

// reset forgets every peer: the speaker that had them is gone.
func (r *neighborReconciler) reset() { clear(r.configured) }

func sortedAddrs(m map[netip.Addr]peers.Peer) []netip.Addr {
	return slices.SortedFunc(maps.Keys(m), netip.Addr.Compare)
}
