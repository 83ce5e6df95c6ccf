// Package bird is tabby's BGP agent: an embedded GoBGP v4.8.0 speaker whose sessions and routes
// are computed from the datastore and kept in step with it. tabby-node feeds it (SetNodes,
// SetBGPConfiguration, SetBGPPeers, SetSecrets, SetPools, SetLocalPrefixes) and receives the
// learned routes through Config.OnRoute for felix. Only bird/... imports GoBGP.
//
// # Layout
//
//   - bird/peers: pure computation of the speaker identity (router ID = BGP address, AS from the
//     tabby.dev/bgp-asn annotation, BGPConfiguration.asNumber or 64512) and the desired sessions
//     (mesh, route reflectors, BGPPeers with node/nodeSelector/peerSelector, passwords, ports,
//     multihop, timers). Table-driven tests.
//   - bird/speaker: the narrow Speaker interface and its GoBGP implementation (policies, paths,
//     peers, the event watch, the graceful stop, and a GoBGP log adapter).
//   - bird/status: the gRPC status service (unix socket, JSON codec) and its Client.
//   - bird/autodetect: the node's BGP address (cidr=, interface=, can-reach=, default: the
//     interface holding the Node's InternalIP), with its prefix length.
//   - bird (this package): the reconcile loop, event handling, restart-vs-dead logic, metrics.
//
// # IPv6 (MP-BGP)
//
// A node with an IPv6 BGP address (tabby.dev/bgp-ipv6-address) offers IPv6 unicast beside IPv4
// unicast on every session it opens, over the same IPv4 sessions (RFC 4760); its IPv6 blocks go
// out in MP_REACH_NLRI with that address as next hop, never a link-local one. A node without
// one offers exactly what it did before IPv6, and peers with dual-stack nodes as before. GoBGP's
// prefix sets hold one family each, so every prefix set of the policy is two (the IPv6 one is
// named with -v6) and every statement matching one is two: the import and export rules, the
// hijack protections included, are the same for both families.
//
// A BGPPeer may also name an IPv6 address (peerIP 2001:db8::1 or [2001:db8::1]:1179): that
// session starts from the node's IPv6 BGP address (GoBGP listens on both addresses) and carries
// IPv6 unicast only, as Calico's do; IPv4 routes keep their IPv4 session. A node without an IPv6
// BGP address opens no such session and `tabbyctl node status` says why. Link-local peers are
// refused: a BGPPeer names no interface. The status shows each session's families as BIRD's
// channels: negotiated ("up"), offered by us but not by the peer ("not negotiated": a ToR
// without an IPv6 channel on the IPv4 session), or not yet ("offered"), each with the routes
// received, accepted (by the import policy: in GoBGP's RIB) and sent. GoBGP's own "accepted"
// count is taken before its global import policy, so it is not used. Two tabby nodes peer over
// IPv4 when both have it
// (carrying IPv6 by MP-BGP), else over IPv6: a node without an IPv4 BGP address (IPv6-only)
// takes a router ID derived from its name (peers.RouterID) and meshes over IPv6.
//
// Tested on real sessions: BIRD2 and FRR ToRs over IPv6 sessions with two nodes each learn
// every node's IPv6 block with its IPv6 next hop (TestToRIPv6TwoNodes, TestFRRToRLearnsIPv6),
// and over MP-BGP on IPv4 (TestBIRD2ToRLearnsIPv6); the hijack rules hold for IPv6 on both
// kinds of session (TestToRIPv6, TestToRCannotHijackIPv6, TestFirstASEnforcedIPv6); route
// reflectors pass IPv6 blocks on with the originating node's IPv6 next hop, between dual-stack
// clients over IPv4 sessions and IPv6-only ones over IPv6 (TestRouteReflectorsIPv6,
// TestIPv6OnlyRouteReflector).
//
// # Reconciling
//
// Every input change wakes Run, which recomputes the desired state and diffs it against what
// GoBGP holds: a peer is deleted and re-added only when its computed configuration changed (a
// BGPPeer, BGPConfiguration or Secret change resets exactly the sessions it concerns; a node
// joining adds its sessions without touching others). After a (re)start the order is policy,
// our paths, then peers: GoBGP sends End-of-RIB as soon as a session is up.
//
// # Route policy
//
// Import: REJECT by default; accept prefixes inside an IPPool (any length down to /32) from
// tabby nodes. From an external router (a BGPPeer address that is not a tabby node):
//
//   - a prefix equal to or inside one of this node's own prefixes is rejected;
//   - an eBGP router's route whose AS path does not begin with the router's AS is rejected
//     (RFC 4271 section 6.3, "enforce first AS"), unless its BGPPeer has routeServer: true
//     (a route server, RFC 7947, passes routes on without its own AS);
//   - inside a pool, only what IPAM explains is accepted: the exact prefix of a block that
//     exists in the cluster, or a borrowed /32 recorded in a block (tabby-node feeds both from
//     the IPAMBlocks, SetRoutable). A more specific route inside a block, or anything else, is
//     rejected, so a ToR cannot pull part of a node's block away on any node;
//   - what is accepted gets LOCAL_PREF 50 (the cluster's own paths have 100) and community
//     0:201. LOCAL_PREF is compared before AS-path length, so a node's own announcement of its
//     block beats any external path for it on every reflector and node; before, a ToR in
//     route-server mode (empty AS path) tied on AS-path length with the owner's iBGP path and won
//     as eBGP, and the reflectors sent the block to the ToR.
//
// AS-per-rack designs keep working: nodes learn other racks' blocks (exact block prefixes,
// first AS = their ToR's) from their ToR, the only path they have. Tested with a real BIRD2 ToR
// (TestRouteServerToRCannotTakeABlock, TestToRMoreSpecificInsideABlockRejected,
// TestFirstASEnforced). Export: REJECT by default; never a route tagged 0:201 (no ToR route
// leaks into the mesh or to another ToR); accept prefixes inside a pool. Routes outside the
// pools (host routes, a ToR's default) are neither learned nor passed on.
// Learned best paths (GoBGP BEST watch, no polling) inside the pools go to OnRoute; a prefix whose
// best path becomes one of ours is withdrawn there.
//
// Service advertisement (Calico's): every node originates the BGPConfiguration's
// serviceClusterIPs and serviceExternalIPs and sends them to its external routers only, so a ToR
// that peers with each node has one path per node (ECMP; kube-proxy on the node takes it from
// there). No node sends them to another, and none accepts them (nor anything inside them) from
// anyone, even where a range lies inside a pool: a ToR's more specific route cannot pull a
// service's traffic off the nodes. A topology whose ToRs peer only with route reflectors gets
// the services from the reflectors alone. Per-service /32s (externalTrafficPolicy Local) are
// not announced.
//
// # Route reflectors
//
// A node with tabby.dev/route-reflector-cluster-id reflects for every iBGP tabby node it peers
// with, including the other reflectors of its cluster (its siblings). GoBGP (v3, and the workaround is kept on v4) adds
// ORIGINATOR_ID and CLUSTER_LIST only to routes it sends to a client; with siblings as plain
// non-clients of each other, a client route passed from one to the other came out with the
// first reflector's ORIGINATOR_ID (found by TestRouteReflectors), so siblings are clients of
// each other. But GoBGP checks the CLUSTER_LIST only when sending (RFC 4456 section 8 asks for
// it on receipt), before export policy, and when that check drops a new best path it never
// withdraws the old one it had sent. With the shared cluster ID on the sibling sessions, each
// sibling kept the other's reflected copy of every client route: when the client withdrew, each
// one's best path became the other's copy, which it may not send back, so neither withdrew and
// both (and every client) kept the route for good (hack/bench/mesh: 76 routes left; BIRD2
// withdrew them all). So:
//
//   - On a sibling session GoBGP's cluster ID is this node's router ID (RFC 4456's default),
//     not the shared one: a sibling's copy carries CLUSTER_LIST [sibling's router ID] and the
//     send-side check never drops it. Clients still get [cluster ID] (or [cluster ID, sibling]
//     for a route the reflector has only from its sibling), and ORIGINATOR_ID stays the
//     originating node's.
//   - Loops between siblings are kept out by policy instead: a route learned from a sibling is
//     tagged with community 0:202 on import and never exported to a sibling. A policy reject,
//     unlike the CLUSTER_LIST check, makes GoBGP withdraw what it had sent, so a reflector whose
//     best path becomes its sibling's copy withdraws its own from the sibling, and a client's
//     withdrawal converges. The tag is stripped from every export (a reflector of another
//     cluster must not read it as its own).
//   - A sibling's copy gets MED+1 on import, so a path the reflector has first hand always wins
//     over it (GoBGP has no CLUSTER_LIST-length tie-break; on router ID alone, a reflector would
//     pass on its sibling's copy of a client whose address is above the sibling's).
//   - A client that peers with one reflector only is reached through the other: the sibling's
//     copy is reflected to the other's clients (TestRouteReflectorsWithdraw).
//   - When a client withdraws a route, the sibling's copy of it (ORIGINATOR_ID = that client)
//     goes with the client's own (GoBGP as tabby builds it), so a reflector withdraws in one
//     round instead of first passing on a copy that is about to be withdrawn too. A client
//     whose session with one reflector ends is still reached through the other's copy.
//
// Known limit: with several clusters whose reflectors peer across clusters, a route can come
// back to a cluster with its own ID in the CLUSTER_LIST, and GoBGP's send-side check can again
// leave a stale copy; one cluster (any number of siblings) is what the tests cover.
//
// Scale (hack/bench/rrscale: two reflectors, N injected clients that hold the reflectors to the
// hold time as a tabby node does, BIRD2 as reference). GoBGP v4 handles each peer's messages
// on that peer's goroutine, under a server lock that handlers share and every API call
// (AddPeer, DeletePeer, ListPeer) takes exclusively; one UPDATE costs the propagation to every
// other peer. tabby builds GoBGP with fixes for what that did to a reflector with hundreds of
// clients (third_party/gobgp/TABBY.md has each mechanism and its test):
//
//   - routes never sent on a session: a route reaching the RIB while a client's initial table
//     was sent, and whole sessions that sent nothing (a stop message left by the session
//     before);
//   - live sessions ended: the hold timer expired while our own receiver was busy, and the
//     clients heard no keepalive while the reflector built their initial tables, nor in
//     OpenConfirm (none at all on a session's first run, none while the state change's
//     handler waited for the server's lock);
//   - cost: a write per UPDATE, 185 kB of adj-RIB shards per peer, attribute lists rebuilt on
//     the heap several times per route and client, a map and a sync.Map node per route and
//     client to record what was sent (now a bit per destination and client: a reflector with
//     1,000 clients went from 298 to 140–160 MB at idle), two goroutine hand-offs per route and
//     client on the way to the session's sender, which then sent each route with a write of
//     its own (now a queue the sender empties after it lets ready goroutines run: at 1,000
//     clients 12–13 s of CPU to converge instead of 19–25 s), and a debug record built for
//     every UPDATE sent (tabby's log handler takes GoBGP's debug records for connect failures;
//     per-UPDATE records now sit below debug);
//   - the copy of a route built, packed and serialised once per client: every iBGP peer of
//     one kind (the clients of a reflector, the nodes of a mesh) is now sent one copy, built
//     once, whose UPDATE is serialised once. An export statement that modifies the route
//     keeps that only when its modifications read the route alone (communities, MED,
//     LOCAL_PREF, ORIGIN: built once per shared copy); a next-hop or AS-path action makes a
//     copy per peer again. The export policy strips the sibling tag with a statement of its
//     own, which only a sibling's copy matches (at 1,000 clients: 47 s and 41 s of CPU to
//     converge before, 23–29 s and 19–24 s after). A client's withdrawal, the one UPDATE every
//     other client is sent, is serialised once too;
//   - the routes sent to each peer counted by running the whole RIB through the peer's export
//     policy, for every peer, under the server's exclusive lock (2 s per status at 1,000
//     clients, and a poll that asked for them starved every session's keepalives at 500): they
//     are now counted from the record of what each peer was sent, and every status, poll and
//     metrics scrape has them.
//
// tabby's side of it: WaitSynced's poll of the peers backs off. A lost session with a tabby
// node still drops its routes at once and re-adds the peer, which at 1,000 clients turns each
// reset into more load.
//
// Next hops are never changed on iBGP.
// To an eBGP peer GoBGP sets itself as next hop (before export policy) unless the BGPPeer has
// keepOriginalNextHop: then an export statement restores the next hop the route had (GoBGP's
// "unchanged" action), i.e. the owning node, for a reflector's own blocks, its clients' and
// those reflected to it by another reflector alike. That is what lets a ToR between two subnets
// forward straight to the owner instead of bouncing traffic off a reflector
// (TestRouteReflectorKeepsNextHopToExternal, hack/e2e TestMultiHopNative).
//
// # Restart versus death
//
// Every session between tabby nodes has graceful restart (RFC 4724) and the RFC 8538 "N" bit
// enabled. GoBGP keeps a graceful-restart peer's routes as stale for the whole restart time
// (120 s) on any session loss: hold-timer expiry and a TCP reset included. Tabby honours that only
// for a planned restart:
//
//   - Stop(true), the restart-style shutdown, resets every session in one call with a Cease /
//     Administrative Reset carrying the shutdown communication "tabby graceful restart", waits
//     until none is established, then stops GoBGP (StopBgp then has nothing to send). One call,
//     and GoBGP (tabby's build) sending nothing more to a session whose NOTIFICATION is queued:
//     reset one after the other, each session that ended first had its routes withdrawn from
//     the sessions still up, which at a reflector cost N² updates (16 s to stop with 1,000
//     clients) and made clients drop routes they should have kept (TestRouteReflectorGracefulStop). With the N
//     bit, a Cease that is not a Hard Reset is a graceful restart for the receiver, so peers keep
//     our routes. (GoBGP's own StopBgp sends Peer De-configured, which RFC 8538 maps to a Hard
//     Reset: routes dropped at once. That is Stop(false).) GoBGP v4's StopBgp with
//     AllowGracefulRestart closes the connections without any NOTIFICATION instead: the
//     receiver then sees "read-failed", exactly what a crashed node looks like, and tabby treats
//     a crash as a death. So the Cease with its communication stays: it is what tells the two
//     apart.
//   - The receiving bird sees that NOTIFICATION's communication through GoBGP's log (v4's peer
//     event gives the reason class, "notification-received cease/administrative-reset", but not
//     the communication) and marks the peer restarting for its restart time. Everything else
//     about a session's end comes from v4's peer event itself: its reason is what `tabbyctl
//     node status` shows ("session down: hold-timer-expired"), and a Hard Reset is read from it. Node.RestartingUntil
//     (tabby-node fills it from the Node annotation tabby.dev/bgp-restarting) marks a node the
//     same way, for a restart that cannot send the notification (a power cycle, a link
//     maintenance).
//   - Any other loss of an established session with a tabby node (hold timer, connection reset or
//     closed without a notice) while the node is not marked: bird deletes and re-adds the peer,
//     which drops its routes at once; the session comes back by itself if the node does. A mark
//     that ends while the node is still away drops its routes then. A Hard Reset needs nothing:
//     GoBGP drops the routes itself. A deleted Node's session is deleted (routes gone at once).
//   - Sessions with external routers keep GoBGP's graceful-restart behaviour.
//   - Between two tabby nodes the higher address waits (passive): GoBGP refuses connections for
//     5 s after a failed attempt, so two sides dialling each other after a restart could miss each
//     other for many seconds, and a helper whose dial is accepted and then closed drops the routes
//     it keeps.
//   - The helper that stays up sits in that 5 s Idle after the restarting node's Cease, so a node
//     that restarts faster dials into it and, left alone, would wait 5 s more itself. A tabby node
//     peer whose connection ends before the session ever opened (since it was added) holds no
//     route, so bird re-adds it at once (a fresh FSM dials again in 1-2 s), at most 10 times
//     in a row (a peer refusing for good, e.g. a wrong AS, is then paced by GoBGP's Idle).
//     The waiting side's 5 s Idle (it holds the routes: re-adding would drop them) stays.
//   - After a restart, WaitSynced returns once every established peer has sent End-of-RIB: only
//     then should the dataplane remove the routes it kept and did not learn again.
//
// Measured here (go test ./bird, 2 cores, loopback addresses in a private namespace):
//
//	Stop(true), restarted 3 s later      routes kept at the peer, no update but the withdrawal of
//	                                     a prefix the node no longer has (after its End-of-RIB);
//	                                     session back 6.2-6.9 s (waiting side) / 6.5-6.7 s
//	                                     (dialling side; 10.4-11.9 s before the re-add above)
//	                                     after the stop: the helper's 5 s Idle + a 1-2 s dial
//	Stop(false)                          routes gone at the peer in < 1 s
//	link cut (iptables DROP)             routes gone at both peers 8.9-9.0 s after the cut (hold
//	                                     9 s: a lower BGPConfiguration holdTime widens the margin)
//	SIGKILL, not coming back             routes gone 1.4-1.5 ms after the kill
//	Node deleted (SetNodes without it)   routes gone in < 1 s
//
// Known limits: a helper whose reconnect to a restarting node lands between the node's StartBgp
// and its AddPeer (a few milliseconds) is refused and drops the stale routes (GoBGP treats the
// failed attempt as the end of the restart); they come back with the session. A tabby-node that
// crashes and comes back is treated as dead, then re-learned. Passwords need plain TCP: Go's
// listeners default to MPTCP since Go 1.24, on which GoBGP v3 could not set TCP MD5 (passwords
// silently unenforced: tabby then needed `godebug multipathtcp=0`). GoBGP v4 turns MPTCP off on
// its own listener, and Go's dialers are plain TCP, so the godebug is gone; TestPasswords (a
// wrong and a missing password never establish) is the proof. A wrong or missing password
// leaves the session in active with "i/o timeout" and a password hint in status.
//
// # Malformed input
//
// A peer's malformed UPDATE must never take the node down: GoBGP runs inside tabby-node, and a
// panic there is the agent's death. TestMalformedUpdates opens a real session from a raw BGP
// speaker (internal/bgpwire, no BGP library) and sends 17 malformed messages next to a
// healthy session; GoBGP v4.8.0 does, as measured:
//
//	a message of an undefined type (7)                   session reset, NOTIFICATION 1/3
//	NEXT_HOP shorter than 4 bytes, not transitive        treat-as-withdraw (RFC 7606)
//	unknown attribute marked well-known                  session reset, NOTIFICATION 3/2
//	treat-as-withdraw carrying MP_REACH of a family the
//	  session did not negotiate                          treat-as-withdraw
//	ORIGIN not transitive or over-long, truncated
//	  attribute header, NEXT_HOP 0.0.0.0/multicast/
//	  class E/6 bytes                                    treat-as-withdraw
//	an attribute longer than its section or the message  nothing (route and session kept)
//	withdrawn-routes length past the message             session reset, NOTIFICATION 3/1
//	NLRI prefix length 33                                session reset, NOTIFICATION 3/10
//	prefix outside every pool, next hop 0.0.0.0          rejected by import policy
//
// Each time the other session and its routes stay, and the peer's next valid UPDATE (on a new
// session after a reset) is installed. The test fails against the speakers tabby moved away
// from: with GoBGP v3.37.0 (tabby's before) the undefined message type panics the process (a
// nil dereference in the FSM's error handling, fsm.go handlingError: v3's parser returns no
// message with the error), which is tabby-node's death at the hands of any established peer;
// with GoBGP v4.3.0 the NEXT_HOP case panics (bgp.ValidateAttribute, CVE-2026-30405). The other
// published patterns (CVE-2026-41642, CVE-2026-42285) do not crash v3.37.0 as reconstructed
// here: v3 resets on the family check before treat-as-withdraw and its TreatAsWithdraw drops
// the attributes the v4 crashes then validated.
//
// # Benchmark (go run -C hack ./bench/bird: one host, 2 cores, tabby and BIRD2 in the same run)
//
//	GoBGP v3.37.0 (2026-11-21)  tabby all-seen p50/p99   BIRD2 2.0.12 all-seen p50/p99   (two runs)
//	full mesh, 20 speakers      2.0-2.4 ms / 9-11 ms     1.7-1.9 ms / 39-46 ms
//	2 RRs + 18 clients          1.3-2.0 ms / 9-18 ms     1.1-1.3 ms / 42-43 ms
//	speaker, 19 peers, idle     RSS 26 MB, CPU 0.10% of a core (targets < 60 MB, < 1%)
//
//	GoBGP v4.8.0 (2026-11-24)   tabby all-seen p50/p99   BIRD2 2.0.12 all-seen p50/p99   (one quiet run)
//	full mesh, 20 speakers      2.6 ms / 6.5 ms          3.3 ms / 41 ms
//	2 RRs + 18 clients          1.6 ms / 5.2 ms          2.7 ms / 51 ms
//	speaker, 19 peers, idle     RSS 45 MB, CPU 0.6% of a core
//
// all-seen: a prefix added at one node until the last of the 19 others has it (tabby: OnRoute,
// before felix; BIRD2: in its kernel table, learned from a blackhole route the way Calico
// originates blocks). Target p99 < 250 ms.
package bird
