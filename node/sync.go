package node

import (
	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix"
)

// onUpdates hands one pass of the syncer's changes to the agents, each the messages it is made
// of: felix the dataplane's (nodes, pools, blocks, this node's workloads, the pods' addresses,
// the FelixConfiguration),
// bird BGP's (nodes, pools, blocks, the BGP objects and their Secrets, the LoadBalancer pools and
// the Services it may announce: kube-proxy, not felix, forwards a Service's traffic). Each queues
// its part as one batch for its own loop; nothing here keeps, diffs or converts state.
//
// The datastore's InSync goes to bird alone (it opens no session before it). felix hears InSync
// from declareInSync, once BGP has re-learned its routes too: before that, a route felix does
// not know yet is not a stale route. A node without BGP (--bgp=none) has no bird: BGP's objects
// go nowhere.
func (a *Agent) onUpdates(msgs []any) {
	var toFelix, toBird []any
	var synced, tunnelInputs bool
	for _, msg := range msgs {
		switch u := msg.(type) {
		case model.FelixConfigurationUpdate:
			toFelix = append(toFelix, msg)
			// The observation endpoint says flow logs are off while they are.
			a.flowLogsOn.Store(u.Config != nil && u.Config.Spec.FlowLogs != nil && u.Config.Spec.FlowLogs.Enabled)
		case model.WorkloadUpdate, model.WorkloadRemove, felix.PodIPsUpdate, felix.PodIPsDelta:
			toFelix = append(toFelix, msg)
		case model.BGPConfigurationUpdate, model.BGPPeerUpdate, model.BGPPeerRemove, model.BGPFilterUpdate, model.BGPFilterRemove, model.SecretUpdate, model.SecretRemove,
			model.LoadBalancerPoolUpdate, model.LoadBalancerPoolRemove, model.ServiceUpdate, model.ServiceRemove:
			toBird = append(toBird, msg)
		case model.InSync:
			toBird = append(toBird, msg)
			synced = true
		default: // nodes, pools, blocks
			toFelix = append(toFelix, msg)
			toBird = append(toBird, msg)
			tunnelInputs = a.tunnel.record(msg) || tunnelInputs
		}
	}
	a.felix.OnUpdates(toFelix)
	if a.bgp != nil {
		a.bgp.OnUpdates(toBird)
	}
	if tunnelInputs {
		a.kickTunnel()
	}
	if synced {
		a.syncedOnce.Do(func() { close(a.synced) })
	}
}

func (a *Agent) kickTunnel() {
	select {
	case a.tunnelKick <- struct{}{}:
	default:
	}
}
