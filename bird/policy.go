package bird

import (
	"context"
	"net/netip"

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
