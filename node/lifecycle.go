package node

import (
	"context"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird"
)

// shutdown: restart-style leaves the kernel routes in place (felix has stopped) and closes the
// sessions with a graceful-restart notice, so peers keep this node's routes until it is back;
// final withdraws everything. Without BGP there is nothing to close.
func (a *Agent) shutdown() error {
	if a.bgp == nil {
		return nil
	}
	return a.bgp.Stop(a.cfg.Shutdown != "final")
}

// inSyncGrace bounds how long felix keeps routes it has not re-learned when a peer does not come
// back: past it, what BGP has not confirmed is stale.
const inSyncGrace = 30 * time.Second

// declareInSync lets felix remove stale state once it knows everything again: the datastore has
// synced (every object of the syncer's and the NetworkPolicy inputs, so no policy chain of the
// last run is taken away before it is computed again) and every BGP peer that is up has sent its
// End-of-RIB — re-learn, re-advertise, and only then remove what is stale. A node without BGP
// (--bgp=none) learns no route: the datastore and the policy inputs are all it waits for.
func (a *Agent) declareInSync(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.synced:
	}
	if a.policy != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-a.policy.Synced():
		}
	}
	if a.bgp != nil {
		if err := a.bgp.WaitSynced(ctx, inSyncGrace); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("BGP did not sync: removing stale routes anyway", "error", err)
		}
	}
	a.felix.OnUpdate(model.InSync{})
	return nil
}

func allEstablished(peers []bird.PeerStatus) bool {
	for _, p := range peers {
		if p.State != "established" {
			return false
		}
	}
	return true
}
