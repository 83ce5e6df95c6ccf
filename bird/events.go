package bird

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
	"github.com/tabbynet/tabby/bird/status"
)

// onEvent runs on the speaker's watch goroutine (best paths, state changes) or on a GoBGP
// session goroutine (logs). It never calls the speaker.
func (b *Bird) onEvent(e speaker.Event) {
	switch e.Type {
	case speaker.BestPath:
		b.onBest(e)
	case speaker.PeerStateChanged:
		b.onState(e)
	case speaker.PeerLog:
		b.onPeerLog(e)
	case speaker.AcceptedPath:
		b.onAccepted(e)
	}
}

func (b *Bird) sessionLocked(addr netip.Addr) *session {
	s := b.sessions[addr]
	if s == nil {
		s = &session{state: "idle", since: time.Now()}
		b.sessions[addr] = s
	}
	return s
}

// restartingLocked tells whether a tabby node peer is in a planned restart: it said so with its
// last NOTIFICATION, or its Node is marked.
func (b *Bird) restartingLocked(addr netip.Addr, p peers.Peer, now time.Time) bool {
	if s := b.sessions[addr]; s != nil && now.Before(s.gracefulUntil) {
		return true
	}
	n, ok := b.in.node(p.Node)
	return ok && now.Before(n.RestartingUntil)
}

func (b *Bird) onState(e speaker.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessionLocked(e.Peer)
	old := s.state
	s.state = e.State
	if (old == "established") != (e.State == "established") {
		s.since = e.Time
	}
	if e.State == "established" {
		s.info, s.inGR, s.flush, s.hardReset, s.gracefulUntil = "", false, false, false, time.Time{}
		s.upSinceAdded, s.redial, s.redials, s.bfdDown, s.explained = true, false, 0, false, false
		b.log.Info("BGP session established", "peer", e.Peer)
		return
	}
	if b.stopped {
		return
	}
	p, ok := b.desired[e.Peer]
	// A connection to a tabby node that ends before the session opens leaves GoBGP's FSM in
	// Idle for a hard-coded 5 s, refusing the peer's own connections meanwhile. After a
	// restart that is the usual case (the peer is still in its own Idle after our
	// graceful-restart Cease) and would hold the session back by that Idle again. A peer that
	// was never established since it was added holds no route, so re-adding it loses nothing,
	// and a fresh FSM dials again after its usual connect delay.
	if ok && p.Node != "" && e.State == "idle" && (old == "opensent" || old == "openconfirm") &&
		!s.upSinceAdded && s.redials < maxRedials {
		s.redial = true
		b.dirty |= dirtyNeighbors
		b.trigger()
		return
	}
	if old != "established" {
		return
	}
	// GoBGP v4 says why the session ended; a Cease / Hard Reset (RFC 8538) is never a
	// graceful restart, and GoBGP has dropped the routes itself.
	// With graceful restart negotiated GoBGP folds a reset, a NOTIFICATION and a hold-timer
	// expiry into "graceful-restart": then the log's last word (already in s.info) says more.
	if e.Reason != "" && (e.Reason != "graceful-restart" || s.info == "") {
		s.info = "session down: " + e.Reason
	}
	// Folded into "graceful-restart" with nothing logged before it (no hold-timer expiry, no
	// NOTIFICATION), the connection was closed or reset by the peer's kernel: its tabby-node
	// died (crashed, OOM- or SIGKILLed) on a node that runs on, and the routes and rules it
	// programmed stay in place until it is back. A restart it could not announce: a dead or
	// unreachable node is found by the hold timer (or BFD) instead.
	crashed := e.Reason == "graceful-restart" && !s.explained
	s.hardReset = e.HardReset
	bfdDown := s.bfdDown
	s.bfdDown = false
	switch {
	case !ok:
	case bfdDown && !b.restartingLocked(e.Peer, p, e.Time):
		// The peer is gone, whatever graceful restart says: GoBGP would keep a router's
		// routes (or a node's, until the flush) as stale for the whole restart time, and the
		// point of BFD is that they go now. A BFD down during a planned restart is that
		// restart.
		s.flush = true
		s.info = "session down: BFD down"
		b.log.Warn("BGP peer declared down by BFD: dropping its routes", "peer", e.Peer, "node", p.Node)
		b.dirty |= dirtyNeighbors
		b.trigger()
	case p.Node == "":
		// A router: GoBGP is its graceful-restart helper as configured on both sides.
		b.log.Warn("BGP session down", "peer", e.Peer, "state", e.State, "reason", s.info)
	case s.hardReset:
		// Not a graceful restart (RFC 8538): GoBGP has dropped the routes already.
		b.log.Warn("BGP session reset by the peer", "peer", e.Peer, "node", p.Node)
	case b.restartingLocked(e.Peer, p, e.Time):
		s.inGR = true
		s.info = "graceful restart: keeping its routes until it is back"
		b.log.Info("BGP peer is restarting gracefully: keeping its routes", "peer", e.Peer, "node", p.Node)
	case crashed:
		s.inGR = true
		s.gracefulUntil = e.Time.Add(restartTime(p))
		s.info = "connection closed by the node without a notice (tabby-node restarting): keeping its routes until it is back"
		b.log.Warn("BGP session with a tabby node closed without a notice: its tabby-node is restarting, keeping its routes",
			"peer", e.Peer, "node", p.Node, "for", restartTime(p))
	default:
		s.flush = true
		b.log.Warn("BGP session with a tabby node lost", "peer", e.Peer, "node", p.Node, "reason", s.info)
		b.dirty |= dirtyNeighbors
		b.trigger()
	}
}

// restartTime is how long a restarting peer may take to come back.
func restartTime(p peers.Peer) time.Duration {
	if p.RestartTime > 0 {
		return p.RestartTime
	}
	return peers.DefaultRestartTime
}

// peerDownMsg starts GoBGP's record of a session's end itself: it explains nothing.
const peerDownMsg = "Peer Down"

// maxRedials bounds the quick re-adds of a peer that keeps refusing (a wrong AS, say): after
// that GoBGP's own 5 s Idle paces the attempts.
const maxRedials = 10

func (b *Bird) onPeerLog(e speaker.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessionLocked(e.Peer)
	if e.BFDDown {
		s.bfdDowns++
		// Only a session that is up has routes to drop; GoBGP's BFD also fires on a session
		// already down (it resets the BGP session whatever its state).
		s.bfdDown = s.state == "established"
	}
	if n := e.Notification; n != nil && n.Code == speaker.CodeCease && n.Subcode == speaker.SubcodeAdministrativeReset && n.Communication == speaker.RestartCommunication {
		s.gracefulUntil = e.Time.Add(restartTime(b.desired[e.Peer]))
	}
	if s.state == "established" && !strings.HasPrefix(e.Message, peerDownMsg) {
		s.explained = true
	}
	// Between sessions the last warning (a connect error, a NOTIFICATION received) is the best
	// explanation there is; the state event's own reason replaces it when a session ends.
	s.info = e.Message
	if p, ok := b.desired[e.Peer]; ok && p.Password != "" && s.state != "established" {
		s.info += " (TCP MD5 password set: a wrong or missing password on either side silently drops every segment)"
	}
}

// withdrawAllTold removes every learned route from the dataplane (speaker restarted).
func (b *Bird) withdrawAllTold() {
	b.tellMu.Lock()
	defer b.tellMu.Unlock()
	b.mu.Lock()
	told := b.told
	b.told = map[netip.Prefix]model.RouteUpdate{}
	b.best, b.received, b.shown = map[netip.Prefix]bestPath{}, map[netip.Prefix]map[netip.Addr]candidate{}, map[netip.Prefix]struct{}{}
	b.mu.Unlock()
	if b.cfg.Routes == nil {
		return
	}
	for _, p := range slices.SortedFunc(maps.Keys(told), netip.Prefix.Compare) {
		b.cfg.Routes(model.RouteRemove{Prefix: p})
	}
}

// takeFlush implements sessionBook. A graceful restart whose window ended before the node came
// back becomes a flush.
func (b *Bird) takeFlush(addr netip.Addr, p peers.Peer, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[addr]
	if s == nil {
		return false
	}
	if s.inGR && s.state != "established" && !b.restartingLocked(addr, p, now) {
		s.inGR = false
		s.flush = true
		s.info = "graceful restart window ended before the node came back: routes dropped"
	}
	f := s.flush
	s.flush = false
	return f
}

// takeRedial implements sessionBook: a tabby node that refused our connection before the
// session opened is re-added (see onState).
func (b *Bird) takeRedial(addr netip.Addr) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[addr]
	if s == nil || !s.redial {
		return false
	}
	s.redial = false
	if s.upSinceAdded || s.state == "established" {
		return false
	}
	s.redials++
	b.log.Debug("tabby node refused our connection before the session opened: re-adding the peer to redial without GoBGP's 5 s idle",
		"peer", addr, "attempt", s.redials)
	return true
}

// adding implements sessionBook: until established again, the speaker holds no route from the
// peer.
func (b *Bird) adding(addr netip.Addr) {
	b.mu.Lock()
	b.sessionLocked(addr).upSinceAdded = false
	b.mu.Unlock()
}

// forget implements sessionBook.
func (b *Bird) forget(addr netip.Addr) {
	b.mu.Lock()
	delete(b.sessions, addr)
	b.mu.Unlock()
}

// Status implements status.Source: every session, with the routes received and sent on it.
func (b *Bird) Status(ctx context.Context) (*status.PeersReply, error) {
	b.mu.Lock()
	spk := b.spk
	b.mu.Unlock()
	var states []speaker.PeerState
	var accepted map[netip.Addr]map[string]uint64
	if spk != nil {
		var err error
		if states, err = spk.Peers(ctx); err != nil {
			return nil, fmt.Errorf("BGP status: %w", err)
		}
		if accepted, err = spk.Accepted(ctx); err != nil {
			return nil, fmt.Errorf("BGP status: %w", err)
		}
	}
	byAddr := map[netip.Addr]speaker.PeerState{}
	for _, s := range states {
		byAddr[s.Address] = s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	reply := &status.PeersReply{Node: b.cfg.NodeName, RoutesAdvertised: b.advertisedN, RoutesLearned: len(b.told), Problems: slices.Clone(b.problems)}
	if b.spk != nil {
		reply.RouterID, reply.ASN = b.speakerCfg.RouterID.String(), b.speakerCfg.ASN
	}
	b.learnedStatusLocked(reply)
	b.in.servicesStatusLocked(reply)
	for _, p := range sortedPeers(b.desired) {
		ps := status.PeerStatus{Address: p.Address.String(), ASN: p.ASN, Type: string(p.Type), Node: p.Node, Source: p.Source}
		if p.Filters != "" {
			ps.Filters = strings.Split(p.Filters, ",")
		}
		if p.Port != 179 {
			ps.Address = netip.AddrPortFrom(p.Address, p.Port).String()
		}
		st, configured := byAddr[p.Address]
		switch {
		case p.Err != "":
			ps.State, ps.Info = "not configured", p.Err
		case !configured:
			ps.State = "idle"
		default:
			ps.State, ps.RoutesReceived, ps.RoutesSent = st.State, st.Received, st.Sent
			for _, f := range st.Families {
				fr := status.FamilyRoutes{Family: f.Family, State: status.FamilyOffered, Received: f.Received, Accepted: accepted[p.Address][f.Family], Sent: f.Sent}
				switch {
				case f.Negotiated:
					fr.State = status.FamilyUp
				case st.State == "established":
					fr.State = status.FamilyNotNegotiated
				}
				ps.RoutesAccepted += fr.Accepted
				ps.Families = append(ps.Families, fr)
			}
		}
		if s := b.sessions[p.Address]; s != nil && p.Err == "" {
			ps.Since, ps.Info = s.since, s.info
			ps.BFDDowns = s.bfdDowns
		}
		if p.BFD.Enabled {
			ps.BFD = st.BFD
			if ps.BFD == "" {
				ps.BFD = speaker.BFDDown
			}
		}
		reply.Peers = append(reply.Peers, ps)
	}
	if reply.Peers == nil {
		reply.Peers = []status.PeerStatus{}
	}
	return reply, nil
}

// Peers returns the sessions as the status service shows them.
func (b *Bird) Peers() []PeerStatus {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := b.Status(ctx)
	if err != nil {
		b.log.Warn("BGP status", "error", err)
		return nil
	}
	return r.Peers
}

func sortedPeers(m map[netip.Addr]peers.Peer) []peers.Peer {
	out := make([]peers.Peer, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b peers.Peer) int { return a.Address.Compare(b.Address) })
	return out
}
