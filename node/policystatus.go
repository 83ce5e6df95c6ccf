package node

import (
	"context"
	"time"

	"github.com/tabbynet/tabby/internal/lease"
	"github.com/tabbynet/tabby/policystatus"
)

// PolicyStatusLease is the Lease (in tabby-node's namespace) whose holder writes the status
// conditions of the admin network policies: one node of the cluster at a time.
const PolicyStatusLease = "tabby-policy-status"

// runPolicyStatus campaigns for the policy status Lease and, while this node holds it, runs the
// status writer. A term whose writer fails ends and the node campaigns again after a pause, so a
// failure that lasts (RBAC missing) is retried without spinning.
func (a *Agent) runPolicyStatus(ctx context.Context, m *policystatus.Metrics) error {
	log := a.log.With("component", "policy-status")
	return lease.Run(ctx, lease.Config{
		Client: a.client, Namespace: a.cfg.Namespace, Name: PolicyStatusLease, Identity: a.cfg.NodeName,
		Logger: log, OnLeading: m.SetLeader,
	}, func(ctx context.Context) {
		err := policystatus.Run(ctx, policystatus.Config{Client: a.client, Logger: log, Metrics: m})
		if err == nil || ctx.Err() != nil {
			return
		}
		log.Error("policy status writer stopped; trying again", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	})
}
