package bird

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/apis/model"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// policyReconciler keeps the speaker's import and export filters at the desired policy.
type policyReconciler struct {
	applied *speaker.Policy
}

// desiredPolicy is the filter for these pools, own prefixes and service CIDRs, over the part
// the sessions make of it (sessionsPolicy). Explained is the caller's to fill: it matters only
// with an external router. The slices are the policy's from now on.
func desiredPolicy(pools, own, services []netip.Prefix, fromSessions speaker.Policy, ipv6NextHop netip.Addr) speaker.Policy {
	pol := fromSessions
	pol.Pools, pol.Local, pol.Services, pol.IPv6NextHop = pools, own, services, ipv6NextHop
	return pol
}

// sessionsPolicy is the part of the filter the sessions make: which peers are external routers,
// which get our next hop or keep the original one, which are sibling reflectors, which must
// put their own AS first. It changes only with the sessions, not with every block.
func sessionsPolicy(sessions []peers.Peer) speaker.Policy {
	var pol speaker.Policy
	for _, p := range sessions {
		if p.Node == "" {
			pol.External = append(pol.External, p.Address)
			if !p.IBGP() && !p.RouteServer {
				pol.FirstAS = append(pol.FirstAS, speaker.PeerAS{Address: p.Address, ASN: p.ASN})
			}
		}
		switch {
		case p.IBGP():
		case p.KeepOriginalNextHop:
			pol.KeepNextHop = append(pol.KeepNextHop, p.Address)
		default:
			pol.NextHopSelf = append(pol.NextHopSelf, p.Address)
		}
		if p.Sibling {
			pol.Siblings = append(pol.Siblings, p.Address)
		}
	}
	return pol
}

// filterChains are the peers' BGPFilters as the speaker applies them: one chain per list of
// filters, with the peers that have it (a peer whose filter is missing has no session: Err).
func filterChains(sessions []peers.Peer, filters map[string]model.BGPFilter) []speaker.FilterChain {
	byList := map[string]*speaker.FilterChain{}
	var lists []string
	for _, p := range sessions {
		if p.Filters == "" || p.Err != "" {
			continue
		}
		ch := byList[p.Filters]
		if ch == nil {
			ch = &speaker.FilterChain{}
			for _, name := range strings.Split(p.Filters, ",") {
				ch.Import = append(ch.Import, filters[name].Import...)
				ch.Export = append(ch.Export, filters[name].Export...)
			}
			byList[p.Filters] = ch
			lists = append(lists, p.Filters)
		}
		ch.Peers = append(ch.Peers, p.Address)
	}
	slices.Sort(lists)
	out := make([]speaker.FilterChain, 0, len(lists))
	for _, l := range lists {
		out = append(out, *byList[l])
	}
	return out
}

// reconcile sets want unless it is the policy in place.
func (r *policyReconciler) reconcile(ctx context.Context, spk speaker.Speaker, want speaker.Policy) error {
	if r.applied != nil && r.applied.Equal(want) {
		return nil
	}
	if err := spk.SetPolicy(ctx, want); err != nil {
		return err
	}
	r.applied = &want
	return nil
}

// reset forgets the policy: the speaker that had it is gone.
func (r *policyReconciler) reset() { r.applied = nil }
