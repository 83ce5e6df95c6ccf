// Package node is tabby-node: the agent that runs on every node (host network) and brings felix
// (the dataplane), bird (the BGP speaker), the node-local IPAM service for the CNI plugin and the
// IPAM garbage collector together over one view of the datastore (node/syncer).
//
// Start-up (node.go): find this node's BGP address (bird/autodetect) and record it on the Node;
// start the IPAM service so pods can get addresses (ipam.go); felix and bird then work from the
// syncer's change stream (sync.go), advertised prefixes handed to bird before its peers are added
// (End-of-RIB is sent as soon as a session is up). Until the datastore has synced and every BGP
// peer has sent End-of-RIB, felix adds and replaces but removes nothing (lifecycle.go): after a
// restart, a route not yet re-learned is not a stale route.
//
// Shutdown is restart-style by default (a DaemonSet rolling update restarts the agent): felix
// stops first and leaves the kernel routes in place, then bird closes its sessions with a
// graceful-restart notice, so peers keep the routes as helpers and pod traffic flows while the
// agent is away. A session lost without that notice is a dead node: peers drop its routes at once.
// `--shutdown=final` withdraws everything instead.
package node
