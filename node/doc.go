// Package node is tabby-node: the agent that runs on every node (host network) and brings felix
// (the dataplane), bird (the BGP speaker), the node-local IPAM service for the CNI plugins and
// the IPAM garbage collector together over one view of the datastore (node/syncer).
//
// Start-up (node.go): wait for this node's Node, find its BGP address of each family
// (bird/autodetect) and record it on the Node; build the allocator, felix and bird; start the
// syncer, the NetworkPolicy watcher, the IPAM service on its unix socket (ipam.go), the health
// and metrics endpoints, the garbage collector and the keeper of the node's tunnel addresses
// (IPIP, and the VXLAN VTEP and MAC of each family). With --bgp=none there is no bird: no BGP
// session, no learned route, and the BGP objects go nowhere.
//
// The wiring (sync.go) holds no state: each pass of the syncer's change stream is split between
// felix (nodes, pools, blocks, this node's workloads, the pods' addresses, the
// FelixConfiguration) and bird (nodes, pools, blocks, the BGP objects and their Secrets); the
// NetworkPolicy watcher feeds felix directly, and bird's learned routes go straight to felix
// (bird.Config.Routes). The datastore's model.InSync goes to bird alone, which opens no session
// before it. felix hears model.InSync later (lifecycle.go): once the datastore and the
// NetworkPolicy inputs have synced and every BGP peer that is up has sent End-of-RIB (or a grace
// has passed; without BGP, the first two alone), so that after a restart a route not yet
// re-learned is not taken for a stale one.
//
// Shutdown (lifecycle.go) is restart-style by default (a DaemonSet rolling update restarts the
// agent): felix stops first and leaves the kernel as it is, then bird closes its sessions with
// a graceful-restart notice, so peers keep the routes and pod traffic flows while the agent is
// away; then the IPAM service finishes the calls in flight. `--shutdown=final` withdraws
// everything instead.
package node
