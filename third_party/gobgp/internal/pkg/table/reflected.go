package table

import (
	"slices"

	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// tabby's change: a route reflector drops the other reflectors' copies of a route when the
// client that originated it withdraws it on a session that stays up.
//
// Two reflectors of one cluster each hold their client's route first hand and the other's
// reflected copy of it (ORIGINATOR_ID = the client). When the client withdrew, each reflector's
// best path became the other's copy: it sent that copy to every client, and withdrew it only
// once the other reflector's withdrawal arrived. Two rounds of updates to every client, the
// first of them a route already gone. The client's own withdrawal says the copies are stale:
// the client sends every reflector the same routes (tabby's nodes do), so the other reflector
// is about to withdraw its copy too.
//
// Only an explicit withdrawal counts, not a session's end: a client that lost its session with
// one reflector is still reached through the other's copy. The copies stay in their sender's
// Adj-RIB-In (a soft reset brings them back); their withdrawal, when it comes, finds nothing.
// Limit: a client that sends different routes to different reflectors loses, at a reflector it
// withdrew a route from, the copies of that route until they are sent again.

// SetWithdrawnBySource marks a withdrawal as sent by its source in an UPDATE.
func (path *Path) SetWithdrawnBySource() { path.bySource = true }

func (path *Path) withdrawnBySource() bool {
	for p := path; p != nil; p = p.parent {
		if p.bySource {
			return true
		}
	}
	return false
}

// dropReflectedCopies removes, after withdraw took its source's own path away, the paths that
// other peers reflected from that source, when the source has no path left here. It returns
// what it removed.
func (dest *destination) dropReflectedCopies(withdraw *Path) []*Path {
	if f := withdraw.GetFamily(); f != bgp.RF_IPv4_UC && f != bgp.RF_IPv6_UC || !withdraw.withdrawnBySource() {
		return nil
	}
	src := withdraw.GetSource()
	if src == nil || src.PeerType != oc.PEER_TYPE_INTERNAL || !src.ID.IsValid() {
		return nil
	}
	if slices.ContainsFunc(dest.knownPathList, func(p *Path) bool { return p.GetSource().Equal(src) }) {
		return nil // an add-path source withdrew one of its paths, not the route
	}
	var dropped []*Path
	dest.knownPathList = slices.DeleteFunc(dest.knownPathList, func(p *Path) bool {
		if p.GetOriginatorID() == src.ID {
			dropped = append(dropped, p)
			return true
		}
		return false
	})
	return dropped
}
