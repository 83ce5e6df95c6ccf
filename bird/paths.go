package bird

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// pathReconciler keeps the paths the speaker originates at what this node advertises: its
// blocks and borrowed addresses, and the service CIDRs. Withdrawals and additions are two
// steps, because the policy goes between them (see CompleteDeferredWork).
type pathReconciler struct {
	advertised map[netip.Prefix]netip.Addr // prefix → the next hop it went out with
}

// desiredPaths are own and services, each with this node's address of its family as next hop.
// A prefix of a family the node has no BGP address of has no next hop to carry: not advertised.
func desiredPaths(own, services []netip.Prefix, nextHop ipfamily.Pair[netip.Addr]) map[netip.Prefix]netip.Addr {
	out := make(map[netip.Prefix]netip.Addr, len(own)+len(services))
	for _, p := range slices.Concat(own, services) {
		if nh := nextHop.Get(ipfamily.OfPrefix(p)); nh.IsValid() {
			out[p.Masked()] = nh
		}
	}
	return out
}

// nextHops are the next hops of this node's own paths: its BGP address of each family.
func nextHops(s peers.Speaker) ipfamily.Pair[netip.Addr] {
	var out ipfamily.Pair[netip.Addr]
	for _, f := range ipfamily.All {
		out.Set(f, s.Address.Get(f).Addr())
	}
	return out
}

// withdraw deletes the paths that are not in want, or not with that next hop.
func (r *pathReconciler) withdraw(ctx context.Context, spk speaker.Speaker, want map[netip.Prefix]netip.Addr) error {
	var errs []error
	for _, p := range slices.SortedFunc(maps.Keys(r.advertised), netip.Prefix.Compare) {
		nh := r.advertised[p]
		if w, ok := want[p]; ok && w == nh {
			continue
		}
		if err := spk.DeletePath(ctx, p, nh); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.advertised, p)
	}
	return errors.Join(errs...)
}

// advertise adds the paths of want the speaker does not have.
func (r *pathReconciler) advertise(ctx context.Context, spk speaker.Speaker, want map[netip.Prefix]netip.Addr) error {
	var errs []error
	for _, p := range slices.SortedFunc(maps.Keys(want), netip.Prefix.Compare) {
		if _, ok := r.advertised[p]; ok {
			continue
		}
		if err := spk.AddPath(ctx, p, want[p]); err != nil {
			errs = append(errs, err)
			continue
		}
		r.advertised[p] = want[p]
	}
	return errors.Join(errs...)
}

// reset forgets every path: the speaker that had them is gone.
func (r *pathReconciler) reset() { clear(r.advertised) }
