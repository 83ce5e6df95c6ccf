package bird

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// speakerReconciler runs the speaker with this node's identity: router ID, AS, addresses,
// listen address and port, cluster ID. GoBGP cannot change any of them while running: a change
// restarts it, and every path, policy and session it held goes with it.
type speakerReconciler struct {
	log        *slog.Logger
	newSpeaker func() (speaker.Speaker, error)
	onEvent    func(speaker.Event)

	running speaker.Speaker
	cancel  context.CancelFunc // ends running's watch
	cfg     peers.Speaker      // running's identity
	started time.Time
	// starting was created and its Start failed: it is retried, not replaced (GoBGP's server
	// loop never ends, so a new one per attempt would leak one each time).
	starting speaker.Speaker
}

// reconcile brings the running speaker to want. stopped: a running speaker was stopped (its
// identity changed), even if starting the new one failed.
func (r *speakerReconciler) reconcile(ctx context.Context, want peers.Speaker) (stopped bool, err error) {
	if r.running != nil && r.cfg == want {
		return false, nil
	}
	if r.running != nil {
		r.log.Info("BGP identity changed: restarting the speaker", "router_id", want.RouterID, "asn", want.ASN, "port", want.ListenPort)
		if err := r.stop(ctx); err != nil {
			return true, err
		}
		stopped = true
	}
	spk := r.starting
	if spk == nil {
		if spk, err = r.newSpeaker(); err != nil {
			return stopped, err
		}
		r.starting = spk
	}
	if err := spk.Start(ctx, want); err != nil {
		return stopped, err
	}
	r.starting = nil
	wctx, cancel := context.WithCancel(context.Background())
	if err := spk.Watch(wctx, r.onEvent); err != nil {
		cancel()
		return stopped, errors.Join(fmt.Errorf("watch BGP events: %w", err), spk.Stop(ctx, false))
	}
	r.running, r.cancel, r.cfg, r.started = spk, cancel, want, time.Now()
	r.log.Info("BGP speaker started", "router_id", want.RouterID, "asn", want.ASN, "port", want.ListenPort, "cluster_id", want.ClusterID)
	return stopped, nil
}

// stop stops the running speaker, withdrawing everything at once at every peer.
func (r *speakerReconciler) stop(ctx context.Context) error {
	spk, cancel := r.running, r.cancel
	if spk == nil {
		return nil
	}
	r.running, r.cancel = nil, nil
	sctx, done := context.WithTimeout(ctx, 10*time.Second)
	defer done()
	err := spk.Stop(sctx, false)
	cancel()
	if err != nil {
		return fmt.Errorf("stop speaker: %w", err)
	}
	return nil
}
