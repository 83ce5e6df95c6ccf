package speaker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

var (
	ipv4Unicast = &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	ipv6Unicast = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
)

// GoBGP is a Speaker embedding GoBGP v4.
type GoBGP struct {
	log      *slog.Logger
	apiAddr  string
	srv      *server.BgpServer
	routerID netip.Addr
	asn      uint32
	// address is our BGP address of each family (invalid: none): the source of every session
	// of that family. With an IPv6 one, IPv4 sessions carry IPv6 unicast too.
	address ipfamily.Pair[netip.Addr]

	mu         sync.Mutex
	watches    []func(Event)
	lastPolicy *Policy
}

// NewGoBGP returns an unstarted GoBGP speaker. apiAddr ("" = off) is where GoBGP's own gRPC
// API listens; it must be a loopback address, since that API can change routes and sessions.
func NewGoBGP(log *slog.Logger, apiAddr string) (*GoBGP, error) {
	if apiAddr != "" {
		host, _, err := net.SplitHostPort(apiAddr)
		if err != nil {
			return nil, fmt.Errorf("GoBGP API address %q: %w", apiAddr, err)
		}
		if a, err := netip.ParseAddr(host); err != nil || !a.IsLoopback() {
			return nil, fmt.Errorf("GoBGP API address %q: must be a loopback address (127.0.0.1:PORT), never the node address", apiAddr)
		}
	}
	return &GoBGP{log: log, apiAddr: apiAddr}, nil
}

// Start implements Speaker. After an error it may be called again.
func (g *GoBGP) Start(ctx context.Context, s peers.Speaker) error {
	// A failed Start may be retried on the same server: GoBGP's Serve loop never ends, so a new
	// server per attempt would leak one each time (an address not there yet, say).
	if g.srv == nil {
		// GoBGP only logs connect failures at debug level, and status wants them: the handler
		// sees every level and passes on what tabby's logger is enabled for.
		lv := new(slog.LevelVar)
		lv.Set(slog.LevelDebug)
		opts := []server.ServerOption{server.LoggerOption(slog.New(newLogHandler(g.log, g.emit)), lv)}
		if g.apiAddr != "" {
			opts = append(opts, server.GrpcListenAddress(g.apiAddr))
		}
		g.srv = server.NewBgpServer(opts...)
		go g.srv.Serve()
	}
	g.routerID, g.asn = s.RouterID, s.ASN
	for _, f := range ipfamily.All {
		g.address.Set(f, s.Address.Get(f).Addr())
	}
	global := &api.Global{
		Asn:        s.ASN,
		RouterId:   s.RouterID.String(),
		ListenPort: int32(s.ListenPort),
		// Only the families tabby speaks. Left empty, GoBGP builds its global and route-server
		// RIBs for every family it knows (two dozen), each table with its shards pre-allocated:
		// heap that a node never uses.
		Families: []uint32{
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST]),
		},
	}
	for _, f := range ipfamily.All {
		listen := g.address.Get(f)
		if ipfamily.OfAddr(s.Listen) == f {
			listen = s.Listen
		}
		switch {
		case !listen.IsValid():
		case f == ipfamily.IPv4:
			global.ListenAddresses = append(global.ListenAddresses, listen.String())
		default:
			// GoBGP fails to start at all when one listen address cannot be bound: an IPv6
			// address that is not (or not yet) on an interface must not take IPv4 BGP down too.
			if err := canBind(listen); err != nil {
				g.log.Warn("not listening for BGP on the IPv6 address: IPv6 peers are reached by dialling out only", "address", listen, "error", err)
			} else {
				global.ListenAddresses = append(global.ListenAddresses, listen.String())
			}
		}
	}
	if err := g.srv.StartBgp(ctx, &api.StartBgpRequest{Global: global}); err != nil {
		return fmt.Errorf("start BGP as AS %d router ID %s port %d: %w", s.ASN, s.RouterID, s.ListenPort, err)
	}
	return nil
}

// canBind tells whether a socket can be bound to addr on this host.
func canBind(addr netip.Addr) error {
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		return err
	}
	return l.Close()
}

// Stop implements Speaker. The graceful variant relies on RFC 8538 (the N bit, negotiated with
// every peer we open): a Cease/Administrative Reset is a graceful restart for the receiver, while
// GoBGP's own StopBgp sends Peer De-configured, which RFC 8538 turns into a Hard Reset. So we
// reset every established session first, wait until none is established (a session that is
// not up gets no NOTIFICATION from StopBgp), then stop.
func (g *GoBGP) Stop(ctx context.Context, restart bool) error {
	if g.srv == nil {
		return nil
	}
	defer g.srv.Stop()
	if !restart {
		return nil
	}
	states, err := g.Peers(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(states, func(p PeerState) bool { return p.State == "established" }) {
		return nil
	}
	// Every session at once (an empty address is every peer): a session that ends before
	// another makes GoBGP withdraw its routes from the sessions still up, so a reflector that
	// reset its clients one call after the other sent each client the withdrawal of the
	// clients reset before it (updates growing with the square of the clients; and a client
	// that had those routes only from this reflector lost them, where a graceful restart
	// should have kept them).
	// A peer not established keeps the notification queued and sends it if its session opens
	// before the server stops.
	if err := g.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: "", Communication: RestartCommunication}); err != nil {
		return fmt.Errorf("graceful stop: reset every session: %w", err)
	}
	// The reset is asynchronous: wait for the NOTIFICATIONs to leave. Each look lists every
	// peer under GoBGP's exclusive lock, which the sessions' teardown needs too: a tight poll
	// keeps a reflector with many clients from ever finishing, so the looks back off.
	wait := 5 * time.Millisecond
	for {
		states, err := g.Peers(ctx)
		if err != nil {
			return err
		}
		still := 0
		for _, p := range states {
			if p.State == "established" {
				still++
			}
		}
		if still == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("graceful stop: %d sessions still established: %w", still, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

func seconds(d time.Duration) uint64 {
	s := uint64((d + time.Second - 1) / time.Second)
	if s == 0 {
		s = 1
	}
	return s
}

// apiPeer is the session to p. On an IPv4 session a dual-stack node offers IPv6 unicast too
// (MP-BGP), an IPv4-only one exactly what it always did; a session to an IPv6 address starts
// from our IPv6 address and carries IPv6 unicast only, as in Calico (IPv4 routes have their IPv4
// session).
func apiPeer(p peers.Peer, routerID netip.Addr, address ipfamily.Pair[netip.Addr]) *api.Peer {
	restart := uint32(seconds(p.RestartTime))
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.ASN,
			AuthPassword:    p.Password,
			Description:     p.Source,
		},
		Transport: &api.Transport{RemotePort: uint32(p.Port), PassiveMode: p.Passive},
		Timers: &api.Timers{Config: &api.TimersConfig{
			// With GoBGP's default of 120 s a passive or late side would wait minutes to connect.
			ConnectRetry:      1,
			HoldTime:          seconds(p.Hold),
			KeepaliveInterval: seconds(p.Keepalive),
		}},
		GracefulRestart: &api.GracefulRestart{
			Enabled:             true,
			RestartTime:         restart,
			NotificationEnabled: true, // RFC 8538, see Stop
		},
	}
	families := []*api.Family{ipv4Unicast}
	switch {
	case p.Address.Is6():
		families = []*api.Family{ipv6Unicast}
	case address.Get(ipfamily.IPv6).IsValid():
		families = append(families, ipv6Unicast)
	}
	local := address.Get(ipfamily.OfAddr(p.Address))
	for _, f := range families {
		ap.AfiSafis = append(ap.AfiSafis, &api.AfiSafi{
			Config:            &api.AfiSafiConfig{Family: f, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		})
	}
	if local.IsValid() {
		// Sessions start from the node address, also on a node with several.
		ap.Transport.LocalAddress = local.String()
	}
	if p.RRClient {
		ap.RouteReflector = &api.RouteReflector{RouteReflectorClient: true, RouteReflectorClusterId: p.ClusterID}
		if p.Sibling && routerID.IsValid() {
			// GoBGP checks the CLUSTER_LIST against the session's cluster ID before export
			// policy and, when that check drops a new best path, never withdraws the old one it
			// sent: with the shared cluster ID, two siblings kept each other's copy of a
			// withdrawn client route for good. Our router ID (RFC 4456's default cluster ID)
			// keeps that check out of the way; the policy keeps loops out (docs/architecture.md,
			// "Route reflectors").
			ap.RouteReflector.RouteReflectorClusterId = routerID.String()
		}
	}
	if p.EBGPMultihop > 1 && !p.IBGP() {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihop)}
	}
	if p.BFD.Enabled {
		// GoBGP resets the session when BFD goes down; its intervals are in microseconds.
		ap.Bfd = &api.BfdPeerConfig{
			Enabled:                  true,
			DesiredMinimumTxInterval: uint32(p.BFD.MinTx.Microseconds()),
			RequiredMinimumReceive:   uint32(p.BFD.MinRx.Microseconds()),
			DetectionMultiplier:      uint32(p.BFD.Multiplier),
		}
	}
	return ap
}

// AddPeer implements Speaker.
func (g *GoBGP) AddPeer(ctx context.Context, p peers.Peer) error {
	if err := g.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, g.routerID, g.address)}); err != nil {
		return fmt.Errorf("add peer %s AS %d: %w", p.Address, p.ASN, err)
	}
	return nil
}

// UpdateBFD implements Speaker. GoBGP changes a peer's BFD in place when nothing in its OPEN
// changes, and the peer's configuration is the one AddPeer gave but for BFD.
func (g *GoBGP) UpdateBFD(ctx context.Context, p peers.Peer) error {
	if _, err := g.srv.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: apiPeer(p, g.routerID, g.address)}); err != nil {
		return fmt.Errorf("update BFD of peer %s: %w", p.Address, err)
	}
	return nil
}

// DeletePeer implements Speaker. GoBGP drops every route learned from the peer at once.
func (g *GoBGP) DeletePeer(ctx context.Context, addr netip.Addr) error {
	if err := g.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
		return fmt.Errorf("delete peer %s: %w", addr, err)
	}
	return nil
}

// apiPath is our path to prefix: IPv4 with a NEXT_HOP, IPv6 in MP_REACH_NLRI (RFC 4760) with
// the node's global IPv6 address as next hop. A next hop of the other family is refused.
func apiPath(prefix netip.Prefix, nextHop netip.Addr) (*apiutil.Path, error) {
	if prefix.Addr().Is4() != nextHop.Is4() {
		return nil, fmt.Errorf("next hop %s is not of the prefix's family", nextHop)
	}
	nlri, err := bgp.NewIPAddrPrefix(prefix)
	if err != nil {
		return nil, err
	}
	origin := bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)
	if prefix.Addr().Is6() {
		mp, err := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, nextHop)
		if err != nil {
			return nil, err
		}
		return &apiutil.Path{Family: bgp.RF_IPv6_UC, Nlri: nlri, Attrs: []bgp.PathAttributeInterface{origin, mp}}, nil
	}
	nh, err := bgp.NewPathAttributeNextHop(nextHop)
	if err != nil {
		return nil, err
	}
	return &apiutil.Path{Family: bgp.RF_IPv4_UC, Nlri: nlri, Attrs: []bgp.PathAttributeInterface{origin, nh}}, nil
}

// AddPath implements Speaker.
func (g *GoBGP) AddPath(ctx context.Context, prefix netip.Prefix, nextHop netip.Addr) error {
	p, err := apiPath(prefix, nextHop)
	if err == nil {
		var rs []apiutil.AddPathResponse
		rs, err = g.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}})
		for _, r := range rs {
			if err == nil {
				err = r.Error
			}
		}
	}
	if err != nil {
		return fmt.Errorf("advertise %s via %s: %w", prefix, nextHop, err)
	}
	return nil
}

// DeletePath implements Speaker.
func (g *GoBGP) DeletePath(ctx context.Context, prefix netip.Prefix, nextHop netip.Addr) error {
	p, err := apiPath(prefix, nextHop)
	if err == nil {
		err = g.srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{p}})
	}
	if err != nil {
		return fmt.Errorf("withdraw %s: %w", prefix, err)
	}
	return nil
}

func (g *GoBGP) emit(e Event) {
	g.mu.Lock()
	ws := g.watches
	g.mu.Unlock()
	for _, fn := range ws {
		fn(e)
	}
}

var sessionStates = map[bgp.FSMState]string{
	bgp.BGP_FSM_IDLE:        "idle",
	bgp.BGP_FSM_CONNECT:     "connect",
	bgp.BGP_FSM_ACTIVE:      "active",
	bgp.BGP_FSM_OPENSENT:    "opensent",
	bgp.BGP_FSM_OPENCONFIRM: "openconfirm",
	bgp.BGP_FSM_ESTABLISHED: "established",
}

var apiSessionStates = map[api.PeerState_SessionState]string{
	api.PeerState_SESSION_STATE_IDLE:        "idle",
	api.PeerState_SESSION_STATE_CONNECT:     "connect",
	api.PeerState_SESSION_STATE_ACTIVE:      "active",
	api.PeerState_SESSION_STATE_OPENSENT:    "opensent",
	api.PeerState_SESSION_STATE_OPENCONFIRM: "openconfirm",
	api.PeerState_SESSION_STATE_ESTABLISHED: "established",
}

// Watch implements Speaker. Best paths come from GoBGP's best-path watch with the current
// table first, so a watcher started after routes arrived still sees them all. GoBGP runs the
// callbacks on one goroutine per watch, in order, until ctx is done; Watch returns at once.
func (g *GoBGP) Watch(ctx context.Context, fn func(Event)) error {
	g.mu.Lock()
	g.watches = append(g.watches, fn)
	g.mu.Unlock()
	cb := server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(pe *apiutil.WatchEventMessage_PeerEvent, t time.Time) {
			if e, ok := peerEvent(pe, time.Now()); ok {
				fn(e)
			}
		},
		OnBestPath: func(paths []*apiutil.Path, t time.Time) {
			now := time.Now()
			for _, p := range paths {
				e, err := bestEvent(p)
				if err != nil {
					g.log.Warn("ignoring a best path GoBGP reported", "error", err)
					continue
				}
				e.Time = now
				fn(e)
			}
		},
	}
	asn := g.asn
	// Every path each peer contributes, after the import policy: the equal-cost paths beside
	// the best one. On the same watch as the best paths, so that they come in the order GoBGP
	// decided them.
	cb.OnPathUpdate = func(paths []*apiutil.Path, t time.Time) {
		now := time.Now()
		for _, p := range paths {
			e, ok, err := acceptedEvent(p, asn)
			if err != nil {
				g.log.Warn("ignoring a path GoBGP reported", "error", err)
			}
			if !ok {
				continue
			}
			e.Time = now
			fn(e)
		}
	}
	if err := g.srv.WatchEvent(ctx, cb, server.WatchPeer(), server.WatchBestPath(true), server.WatchPostUpdate(true, "", "")); err != nil {
		return fmt.Errorf("watch BGP events: %w", err)
	}
	return nil
}

// peerEvent turns GoBGP's peer state event into tabby's; v4 says why a session left
// established (notification-received ..., hold-timer-expired, read-failed, hard-reset).
func peerEvent(pe *apiutil.WatchEventMessage_PeerEvent, now time.Time) (Event, bool) {
	if pe == nil || pe.Type != apiutil.PEER_EVENT_STATE {
		return Event{}, false
	}
	st := pe.Peer.State
	if !st.NeighborAddress.IsValid() {
		return Event{}, false
	}
	e := Event{Type: PeerStateChanged, Peer: st.NeighborAddress.Unmap(), State: sessionStates[st.SessionState], Time: now}
	if st.SessionState != bgp.BGP_FSM_ESTABLISHED {
		e.Reason = st.DisconnectMessage
		e.HardReset = st.DisconnectReason == api.PeerState_DISCONNECT_REASON_HARD_RESET
	}
	return e, true
}

// bestEvent converts a best path (or its withdrawal) into an Event. Anything GoBGP could hand
// over is handled: a path that is not an IPv4 or IPv6 unicast prefix is an error, never a panic.
func bestEvent(p *apiutil.Path) (Event, error) {
	if p == nil || p.Nlri == nil {
		return Event{}, fmt.Errorf("path without NLRI")
	}
	nlri, ok := p.Nlri.(*bgp.IPAddrPrefix)
	if !ok || p.Family != bgp.RF_IPv4_UC && p.Family != bgp.RF_IPv6_UC {
		return Event{}, fmt.Errorf("NLRI %v of family %v: not IPv4 or IPv6 unicast", p.Nlri, p.Family)
	}
	prefix := nlri.Prefix
	if !prefix.IsValid() || prefix.Addr().Is4() != (p.Family == bgp.RF_IPv4_UC) || prefix.Addr().Is4In6() {
		return Event{}, fmt.Errorf("NLRI prefix %v: not a prefix of family %v", prefix, p.Family)
	}
	e := Event{Type: BestPath, Prefix: prefix.Masked(), Withdrawn: p.Withdrawal}
	// Local paths have no peer address: Peer stays zero for them.
	if p.PeerAddress.IsValid() && !p.PeerAddress.IsUnspecified() {
		e.Peer = p.PeerAddress.Unmap()
	}
	for _, a := range p.Attrs {
		switch nh := a.(type) {
		case *bgp.PathAttributeNextHop:
			e.NextHop = nh.Value.Unmap()
		case *bgp.PathAttributeMpReachNLRI:
			if len(nh.Nexthop.AsSlice()) > 0 && !e.NextHop.IsValid() {
				e.NextHop = nh.Nexthop.Unmap()
			}
		}
	}
	return e, nil
}

// acceptedEvent converts a path a peer contributes after the import policy (or its end) into an
// AcceptedPath event; ok is false for what is none (our own paths, End-of-RIB markers).
func acceptedEvent(p *apiutil.Path, localAS uint32) (Event, bool, error) {
	if p == nil || p.Nlri == nil || !p.PeerAddress.IsValid() || p.PeerAddress.IsUnspecified() {
		return Event{}, false, nil
	}
	e, err := bestEvent(p)
	if err != nil {
		return Event{}, false, err
	}
	e.Type = AcceptedPath
	e.Attrs = pathAttrs(p, localAS)
	return e, true, nil
}

// pathAttrs reads what the BGP decision compares of p, with GoBGP's defaults for what it lacks
// (LOCAL_PREF 100, MED 0).
func pathAttrs(p *apiutil.Path, localAS uint32) PathAttrs {
	a := PathAttrs{LocalPref: 100, IBGP: p.PeerASN == localAS, Stale: p.Stale}
	for _, attr := range p.Attrs {
		switch x := attr.(type) {
		case *bgp.PathAttributeLocalPref:
			a.LocalPref = x.Value
		case *bgp.PathAttributeOrigin:
			a.Origin = x.Value
		case *bgp.PathAttributeMultiExitDisc:
			a.MED = x.Value
		case *bgp.PathAttributeAsPath:
			for _, seg := range x.Value {
				switch seg.GetType() {
				case bgp.BGP_ASPATH_ATTR_TYPE_SEQ:
					if a.NeighborAS == 0 && len(seg.GetAS()) > 0 {
						a.NeighborAS = seg.GetAS()[0]
					}
					a.ASPathLen += len(seg.GetAS())
				case bgp.BGP_ASPATH_ATTR_TYPE_SET:
					a.ASPathLen++
				}
			}
		}
	}
	if a.NeighborAS == 0 {
		a.NeighborAS = localAS
	}
	return a
}

// Peers implements Speaker. The routes sent to a peer come from GoBGP's record of what it
// sent (TABBY.md): a count per family, not a walk of the RIB, so a poll may ask for them.
func (g *GoBGP) Peers(ctx context.Context) ([]PeerState, error) {
	var out []PeerState
	err := g.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		addr, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		ps := PeerState{Address: addr, State: apiSessionStates[p.GetState().GetSessionState()]}
		ts := p.GetTimers().GetState()
		if ps.State == "established" && ts.GetUptime() != nil {
			ps.Since = ts.GetUptime().AsTime()
		} else if ts.GetDowntime() != nil {
			ps.Since = ts.GetDowntime().AsTime()
		}
		remote := remoteFamilies(p.GetState().GetRemoteCap())
		for _, af := range p.GetAfiSafis() {
			// GoBGP's "accepted" leaves out only AS-path loops and our own reflected routes:
			// its import policy (tabby's, global) is applied after the count. Received is what
			// the peer sent; Accepted (from the RIB) is what the policy let in.
			ps.Received += af.GetState().GetReceived()
			ps.Sent += af.GetState().GetAdvertised()
			f := af.GetConfig().GetFamily()
			fam := "ipv4"
			if f.GetAfi() == api.Family_AFI_IP6 {
				fam = "ipv6"
			}
			ps.Families = append(ps.Families, FamilyRoutes{
				Family:     fam,
				Negotiated: ps.State == "established" && remote[familyKey{f.GetAfi(), f.GetSafi()}],
				Received:   af.GetState().GetReceived(),
				Sent:       af.GetState().GetAdvertised(),
			})
			ps.EORReceived = ps.EORReceived || af.GetMpGracefulRestart().GetState().GetEndOfRibReceived()
		}
		out = append(out, ps)
	})
	if err != nil {
		return nil, fmt.Errorf("list peers: %w", err)
	}
	bfd := map[netip.Addr]string{}
	g.srv.ListBfdPeer(ctx, func(addr string, st *api.BfdPeerState) {
		if a, err := netip.ParseAddr(addr); err == nil {
			bfd[a] = bfdStates[st.GetSessionState()]
		}
	})
	for i := range out {
		out[i].BFD = bfd[out[i].Address]
	}
	return out, nil
}

var bfdStates = map[api.BfdSessionState]string{
	api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN: BFDAdminDown,
	api.BfdSessionState_BFD_SESSION_STATE_DOWN:       BFDDown,
	api.BfdSessionState_BFD_SESSION_STATE_INIT:       BFDInit,
	api.BfdSessionState_BFD_SESSION_STATE_UP:         BFDUp,
}

type familyKey struct {
	afi  api.Family_Afi
	safi api.Family_Safi
}

// remoteFamilies are the families an established peer's OPEN offered: its multiprotocol
// capabilities, or IPv4 unicast alone when it sent none (RFC 4760 section 8).
func remoteFamilies(caps []*api.Capability) map[familyKey]bool {
	out := map[familyKey]bool{}
	for _, c := range caps {
		if mp := c.GetMultiProtocol(); mp != nil {
			out[familyKey{mp.GetFamily().GetAfi(), mp.GetFamily().GetSafi()}] = true
		}
	}
	if len(out) == 0 {
		out[familyKey{api.Family_AFI_IP, api.Family_SAFI_UNICAST}] = true
	}
	return out
}

// Accepted implements Speaker: the paths in GoBGP's global RIB, best or not, are exactly those
// the import policy let in (a rejected one goes in as a withdrawal).
func (g *GoBGP) Accepted(ctx context.Context) (map[netip.Addr]map[string]uint64, error) {
	out := map[netip.Addr]map[string]uint64{}
	for _, f := range []struct {
		family bgp.Family
		name   string
	}{{bgp.RF_IPv4_UC, "ipv4"}, {bgp.RF_IPv6_UC, "ipv6"}} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := g.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f.family}, func(_ bgp.NLRI, paths []*apiutil.Path) {
			for _, p := range paths {
				if p == nil || p.Withdrawal || !p.PeerAddress.IsValid() || p.PeerAddress.IsUnspecified() {
					continue // our own paths have no peer
				}
				a := p.PeerAddress.Unmap()
				if out[a] == nil {
					out[a] = map[string]uint64{}
				}
				out[a][f.name]++
			}
		})
		if err != nil {
			return nil, fmt.Errorf("count accepted %s routes: %w", f.name, err)
		}
	}
	return out, nil
}

func uint8Field(v any) (uint8, bool) {
	switch x := v.(type) {
	case uint8:
		return x, true
	case int:
		return uint8(x), true
	case int64:
		return uint8(x), true
	case string:
		n, err := strconv.Atoi(x)
		return uint8(n), err == nil
	}
	return 0, false
}
