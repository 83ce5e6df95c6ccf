package node

import (
	"context"
	"log/slog"

	"github.com/tabbynet/tabby/policystatus"
)

// PolicyStatusLease is the Lease (in tabby-node's namespace) whose holder writes the status
// conditions of the admin network policies: one node of the cluster at a time.
const PolicyStatusLease = "tabby-policy-status"

// runPolicyStatus runs the status writer of the admin network policies while this node holds
// PolicyStatusLease.
func (a *Agent) runPolicyStatus(ctx context.Context, m *policystatus.Metrics) error {
	return a.runSingleton(ctx, PolicyStatusLease, "policy-status", m.SetLeader, func(ctx context.Context, log *slog.Logger) error {
		return policystatus.Run(ctx, policystatus.Config{Client: a.client, Logger: log, Metrics: m})
	})
}
