// Package observe is what tabby-node's observation endpoint and its readers agree on: the paths,
// the resources a caller's token must be allowed to get, the name the serving certificate is
// issued to, and how a reader finds a node's endpoint. The endpoint serves a node's flow log
// (NDJSON of flow.Record) and its BGP status (status.PeersReply) over HTTPS; observe/server
// serves it, observe/client reads every node's.
package observe

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Paths of the endpoint.
const (
	// FlowsPath: GET, query from, to (NS/POD, NS/ or an address), verdict (allow or deny),
	// follow (1: stream new records until the client goes), since (RFC 3339: records that end
	// after it). The answer is NDJSON, one flow.Record a line; a following stream also carries
	// an empty line at least as often as its HeartbeatHeader says, so either side notices a
	// dead connection.
	FlowsPath = "/v1/flows"
	// BGPPath: GET, the node's status.PeersReply as JSON.
	BGPPath = "/v1/bgp"
)

// HeartbeatHeader tells a following client how often the stream carries at least a heartbeat
// (a Go duration: 15s).
const HeartbeatHeader = "X-Tabby-Heartbeat"

// The resources a caller's token must be allowed to get (a ClusterRole such as the chart's
// tabby-observer grants them); nothing stores them, RBAC only names them.
var (
	FlowsResource = schema.GroupVersionResource{Group: "tabby.dev", Version: "v1", Resource: "flows"}
	BGPResource   = schema.GroupVersionResource{Group: "tabby.dev", Version: "v1", Resource: "bgpstatuses"}
)

// Verb is the verb RBAC must allow on those resources.
const Verb = "get"

// ServerName is the name every node's serving certificate is issued to: readers dial node
// addresses and verify this name against the CA, as tabby-node verifies tabby-typha's.
const ServerName = "tabby-node"

// DefaultPort is where the chart has tabby-node serve it (host network).
const DefaultPort = 9095

// CASecretSelector finds the Secret the chart writes with the serving certificate and its CA
// (key ca.crt), in whatever namespace the chart was installed.
const CASecretSelector = "app.kubernetes.io/name=tabby,tabby.dev/info=observe-tls"
