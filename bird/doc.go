// Package bird is tabby's BGP agent: an embedded GoBGP v4 speaker (built from third_party/gobgp)
// whose sessions and routes are computed from the datastore and kept in step with it. It
// advertises this node's blocks, learns the other nodes' and the external routers' best paths
// inside the IPPools and hands them to felix, and tells a planned restart from a death, so
// that peers keep a restarting node's routes and drop a dead one's at once. Only bird/...
// imports GoBGP.
//
// Layout:
//   - bird/peers: the speaker's identity and the desired sessions (mesh, route reflectors,
//     BGPPeers), a pure computation;
//   - bird/speaker: the narrow Speaker interface and its GoBGP implementation (route policy,
//     paths, peers, the event watch, the graceful stop, a log adapter);
//   - bird/status: the status service `tabbyctl node status` reads, and its client;
//   - bird/autodetect: the node's BGP address;
//   - this package: the reconcile loop, event handling, restart-versus-death, metrics.
//
// The design (route policy and its hijack protections, service advertisement, IPv6, route
// reflectors and their siblings, restart versus death, passwords, malformed input) is in
// docs/architecture.md, "bird: BGP"; the benchmarks and the restart timings in
// docs/benchmarks.md.
package bird
