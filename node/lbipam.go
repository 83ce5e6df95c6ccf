package node

import (
	"context"
	"log/slog"

	"github.com/tabbynet/tabby/lbipam/controller"
)

// LBIPAMLease is the Lease (in tabby-node's namespace) whose holder assigns the addresses of
// LoadBalancer Services: one node of the cluster at a time.
const LBIPAMLease = "tabby-lbipam"

// runLBIPAM runs the LoadBalancer IPAM controller while this node holds LBIPAMLease.
func (a *Agent) runLBIPAM(ctx context.Context, m *controller.Metrics) error {
	return a.runSingleton(ctx, LBIPAMLease, "lbipam", m.SetLeader, func(ctx context.Context, log *slog.Logger) error {
		return controller.Run(ctx, controller.Config{Client: a.client, Identity: a.cfg.NodeName, Logger: log, Metrics: m})
	})
}
