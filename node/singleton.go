package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/tabbynet/tabby/internal/lease"
)

// runSingleton campaigns for the Lease name (in tabby-node's namespace) and, while this node
// holds it, runs work: the cluster's one writer of something, on whichever node holds the Lease.
// A term whose work fails ends and the node campaigns again after a pause, so a failure that
// lasts (RBAC missing) is retried without spinning.
func (a *Agent) runSingleton(ctx context.Context, name, component string, onLeading func(bool), work func(context.Context, *slog.Logger) error) error {
	log := a.log.With("component", component)
	return lease.Run(ctx, lease.Config{
		Client: a.client, Namespace: a.cfg.Namespace, Name: name, Identity: a.cfg.NodeName,
		Logger: log, OnLeading: onLeading,
	}, func(ctx context.Context) {
		err := work(ctx, log)
		if err == nil || ctx.Err() != nil {
			return
		}
		log.Error(component+" stopped; trying again", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	})
}
