package node

import (
	"context"
	"time"

	"github.com/tabbynet/tabby/internal/lease"
	"github.com/tabbynet/tabby/lbipam/controller"
)

// LBIPAMLease is the Lease (in tabby-node's namespace) whose holder assigns the addresses of
// LoadBalancer Services: one node of the cluster at a time.
const LBIPAMLease = "tabby-lbipam"

// runLBIPAM campaigns for the LoadBalancer IPAM Lease and, while this node holds it, runs the
// controller. A term whose controller fails ends and the node campaigns again after a pause, so
// a failure that lasts (RBAC missing) is retried without spinning.
func (a *Agent) runLBIPAM(ctx context.Context, m *controller.Metrics) error {
	log := a.log.With("component", "lbipam")
	return lease.Run(ctx, lease.Config{
		Client: a.client, Namespace: a.cfg.Namespace, Name: LBIPAMLease, Identity: a.cfg.NodeName,
		Logger: log, OnLeading: m.SetLeader,
	}, func(ctx context.Context) {
		err := controller.Run(ctx, controller.Config{Client: a.client, Identity: a.cfg.NodeName, Logger: log, Metrics: m})
		if err == nil || ctx.Err() != nil {
			return
		}
		log.Error("LoadBalancer IPAM stopped; trying again", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	})
}
