// Package node is tabby-node: the agent that runs on every node (host network) and brings felix
// (the dataplane), bird (the BGP speaker), the node-local IPAM service for the CNI plugin and the
// IPAM garbage collector together over one view of the datastore (node/syncer).
//
// Start-up: find this node's BGP address (bird/autodetect) and record it on the Node; start the
// IPAM service so pods can get addresses; then felix and bird start from the first datastore
// snapshot. Advertised prefixes are handed to bird before its peers are added (End-of-RIB).
//
// Shutdown is restart-style by default (a DaemonSet rolling update restarts the agent): the Node
// is annotated tabby.dev/bgp-restarting with a deadline, bird closes its sessions without a Cease
// so peers keep the routes as graceful-restart helpers, and felix leaves the kernel routes in
// place, so pod traffic flows while the agent is away. A session lost without that mark is a dead
// node: peers drop its routes at once. `--shutdown=final` withdraws everything instead.
package node
