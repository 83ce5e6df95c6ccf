// Package bird is tabby's BGP agent: an embedded GoBGP v4 speaker (built from third_party/gobgp)
// whose sessions and routes follow the datastore. It advertises this node's blocks (and the
// addresses it borrowed in other nodes' blocks), learns the other nodes' and the external
// routers' best paths inside the IPPools and hands them to felix, and tells a planned restart
// from a death, so that peers keep a restarting node's routes and drop a dead one's at once.
// Only bird/... imports GoBGP: upstream v4.8.0 plus tabby's series of patches (sessions that
// stay up and scale at a route reflector; third_party/gobgp/TABBY.md lists each, with its test).
//
// In and out: OnUpdate and OnUpdates take apis/model's messages (nodes, pools, blocks, the
// BGPConfiguration, BGPPeers, their Secrets and BGPFilters, InSync); each message marks only the concerns it
// can change (inputs.go). Learned best paths leave as model.RouteUpdate and model.RouteRemove
// through Config.Routes. With Config.WaitForInSync no session opens before model.InSync.
//
// A pass (CompleteDeferredWork, run by Run; reconcile.go) computes the sessions again when
// their inputs changed (bird/peers), then runs, in this order, only the reconcilers of the
// concerns marked, each changing in GoBGP only what differs:
//   - speaker.go: the speaker's identity (router ID, AS, addresses, port, cluster ID); a change
//     restarts GoBGP, and marks everything else;
//   - paths.go: the paths this node originates (withdrawals before the policy, additions after);
//   - policy.go: the import and export filters;
//   - neighbors.go: the peers, deleting and re-adding only a session whose configuration
//     changed, or whose peer was lost without a restart notice.
//
// GoBGP's events (events.go: best paths, session states, the log's NOTIFICATIONs and BFD
// downs) keep the sessions' state, which decides restart versus death.
//
// Beside it: bird/peers (the speaker's identity and the desired sessions: mesh, route
// reflectors, BGPPeers; a pure computation), bird/speaker (the narrow Speaker interface and its
// GoBGP implementation), bird/status (the status service `tabbyctl node status` reads) and
// bird/autodetect (the node's BGP address).
//
// The design (the order of a start, route policy and its hijack protections, route filters and
// communities, service advertisement, IPv6, route reflectors and their siblings, GoBGP at
// scale, restart versus death, BFD, passwords and malformed input) is in docs/architecture.md,
// "bird: BGP"; figures in docs/benchmarks.md.
package bird
