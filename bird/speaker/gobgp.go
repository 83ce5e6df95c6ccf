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

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tabbynet/tabby/bird/peers"
)

var ipv4Unicast = &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}

// GoBGP is a Speaker embedding GoBGP v3.
type GoBGP struct {
	log     *slog.Logger
	apiAddr string
	srv     *server.BgpServer
	address netip.Addr // our BGP address: next hop and source of every session

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
		opts := []server.ServerOption{server.LoggerOption(&logAdapter{log: g.log, emit: g.emit})}
		if g.apiAddr != "" {
			opts = append(opts, server.GrpcListenAddress(g.apiAddr))
		}
		g.srv = server.NewBgpServer(opts...)
		go g.srv.Serve()
	}
	g.address = s.RouterID
	global := &api.Global{
		Asn:        s.ASN,
		RouterId:   s.RouterID.String(),
		ListenPort: int32(s.ListenPort),
	}
	if s.Address.IsValid() {
		global.ListenAddresses = []string{s.Address.Addr().String()}
	}
	if err := g.srv.StartBgp(ctx, &api.StartBgpRequest{Global: global}); err != nil {
		return fmt.Errorf("start BGP as AS %d router ID %s port %d: %w", s.ASN, s.RouterID, s.ListenPort, err)
	}
	return nil
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
	var up []string
	for _, p := range states {
		if p.State == "established" {
			up = append(up, p.Address.String())
		}
	}
	for _, addr := range up {
		if err := g.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr, Communication: RestartCommunication}); err != nil {
			return fmt.Errorf("graceful stop: reset peer %s: %w", addr, err)
		}
	}
	// The reset is asynchronous: wait for the NOTIFICATIONs to leave.
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
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func seconds(d time.Duration) uint64 {
	s := uint64((d + time.Second - 1) / time.Second)
	if s == 0 {
		s = 1
	}
	return s
}

func apiPeer(p peers.Peer, local netip.Addr) *api.Peer {
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
			// NOTES: a passive or late side waits minutes with GoBGP's default 120 s.
			ConnectRetry:      1,
			HoldTime:          seconds(p.Hold),
			KeepaliveInterval: seconds(p.Keepalive),
		}},
		GracefulRestart: &api.GracefulRestart{
			Enabled:             true,
			RestartTime:         restart,
			NotificationEnabled: true, // RFC 8538, see Stop
		},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: ipv4Unicast, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		}},
	}
	if local.IsValid() {
		// Sessions start from the node address, also on a node with several.
		ap.Transport.LocalAddress = local.String()
	}
	if p.RRClient {
		ap.RouteReflector = &api.RouteReflector{RouteReflectorClient: true, RouteReflectorClusterId: p.ClusterID}
		if p.Sibling && local.IsValid() {
			// GoBGP checks the CLUSTER_LIST against the session's cluster ID before export
			// policy and, when that check drops a new best path, never withdraws the old one it
			// sent: with the shared cluster ID, two siblings kept each other's copy of a
			// withdrawn client route for good. Our router ID (RFC 4456's default cluster ID)
			// keeps that check out of the way; the policy keeps loops out (bird/doc.go).
			ap.RouteReflector.RouteReflectorClusterId = local.String()
		}
	}
	if p.EBGPMultihop > 1 && !p.IBGP() {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihop)}
	}
	return ap
}

// AddPeer implements Speaker.
func (g *GoBGP) AddPeer(ctx context.Context, p peers.Peer) error {
	if err := g.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, g.address)}); err != nil {
		return fmt.Errorf("add peer %s AS %d: %w", p.Address, p.ASN, err)
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

func apiPath(prefix netip.Prefix, nextHop netip.Addr) (*api.Path, error) {
	nlri, err := anypb.New(&api.IPAddressPrefix{Prefix: prefix.Addr().String(), PrefixLen: uint32(prefix.Bits())})
	if err != nil {
		return nil, err
	}
	origin, err := anypb.New(&api.OriginAttribute{Origin: 0}) // IGP
	if err != nil {
		return nil, err
	}
	nh, err := anypb.New(&api.NextHopAttribute{NextHop: nextHop.String()})
	if err != nil {
		return nil, err
	}
	return &api.Path{Family: ipv4Unicast, Nlri: nlri, Pattrs: []*anypb.Any{origin, nh}}, nil
}

// AddPath implements Speaker.
func (g *GoBGP) AddPath(ctx context.Context, prefix netip.Prefix, nextHop netip.Addr) error {
	p, err := apiPath(prefix, nextHop)
	if err == nil {
		_, err = g.srv.AddPath(ctx, &api.AddPathRequest{Path: p})
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
		err = g.srv.DeletePath(ctx, &api.DeletePathRequest{Family: ipv4Unicast, Path: p})
	}
	if err != nil {
		return fmt.Errorf("withdraw %s: %w", prefix, err)
	}
	return nil
}

// Names of tabby's GoBGP policy objects (visible with `gobgp policy` on the local API).
const (
	setPools    = "tabby-pools"
	setLocal    = "tabby-local"
	setServices = "tabby-services"
	setExternal = "tabby-external"
	setLearned  = "tabby-learned-external"
	setKeepNH   = "tabby-keep-next-hop"
	setSiblings = "tabby-sibling-reflectors"
	setFromSib  = "tabby-learned-sibling"
	// LearnedExternalCommunity marks routes learned from a router that is not a tabby node, so
	// that they are never passed on to another peer. AS 0 is reserved: no operator uses it.
	LearnedExternalCommunity = "0:201"
	// LearnedSiblingCommunity marks, inside this speaker only, routes learned from another
	// route reflector of our cluster: never sent to a sibling, stripped from every export.
	LearnedSiblingCommunity = "0:202"
)

// placeholder keeps a set non-empty: GoBGP treats an empty neighbor set as matching everyone.
var placeholder = netip.MustParsePrefix("255.255.255.255/32")

func prefixSet(name string, list []netip.Prefix) *api.DefinedSet {
	ds := &api.DefinedSet{DefinedType: api.DefinedType_PREFIX, Name: name}
	if len(list) == 0 {
		list = []netip.Prefix{placeholder}
	}
	for _, p := range list {
		ds.Prefixes = append(ds.Prefixes, &api.Prefix{IpPrefix: p.Masked().String(), MaskLengthMin: uint32(p.Bits()), MaskLengthMax: 32})
	}
	return ds
}

// SetPolicy implements Speaker. Import: routes inside a pool, except that an external router
// may not announce one of our own prefixes (or anything inside them); what it announces is
// tagged, and so is what a sibling reflector sends (less preferred, never sent to a sibling:
// see bird/doc.go). Export: pool routes, never one learned from an external router (no transit
// between ToRs, no ToR route leaked into the mesh); the service ranges, to external routers
// only, and never imported. Everything else is rejected both ways.
func (g *GoBGP) SetPolicy(ctx context.Context, p Policy) error {
	neighbors := func(name string, list []netip.Addr) *api.DefinedSet {
		ds := &api.DefinedSet{DefinedType: api.DefinedType_NEIGHBOR, Name: name, List: []string{placeholder.String()}}
		for _, a := range list {
			ds.List = append(ds.List, netip.PrefixFrom(a, 32).String())
		}
		return ds
	}
	sets := []*api.DefinedSet{
		prefixSet(setPools, p.Pools),
		prefixSet(setLocal, p.Local),
		prefixSet(setServices, p.Services),
		neighbors(setExternal, p.External),
		neighbors(setKeepNH, p.KeepNextHop),
		neighbors(setSiblings, p.Siblings),
		{DefinedType: api.DefinedType_COMMUNITY, Name: setLearned, List: []string{"^" + LearnedExternalCommunity + "$"}},
		{DefinedType: api.DefinedType_COMMUNITY, Name: setFromSib, List: []string{"^" + LearnedSiblingCommunity + "$"}},
	}
	stripSibling := &api.CommunityAction{Type: api.CommunityAction_REMOVE, Communities: []string{"^" + LearnedSiblingCommunity + "$"}}
	match := func(name string) *api.MatchSet { return &api.MatchSet{Type: api.MatchSet_ANY, Name: name} }
	imp := &api.Policy{Name: "tabby-import", Statements: []*api.Statement{
		// Service addresses are every node's own (kube-proxy): originated here (the global
		// import policy sees local paths too), never learned, even inside a pool.
		{Name: "tabby-import-own-services", Conditions: &api.Conditions{PrefixSet: match(setServices), RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions: &api.Actions{RouteAction: api.RouteAction_ACCEPT}},
		{Name: "tabby-import-no-services", Conditions: &api.Conditions{PrefixSet: match(setServices)},
			Actions: &api.Actions{RouteAction: api.RouteAction_REJECT}},
		{Name: "tabby-import-own-from-external", Conditions: &api.Conditions{NeighborSet: match(setExternal), PrefixSet: match(setLocal)},
			Actions: &api.Actions{RouteAction: api.RouteAction_REJECT}},
		{Name: "tabby-import-pools-from-external", Conditions: &api.Conditions{NeighborSet: match(setExternal), PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ACCEPT, Community: &api.CommunityAction{Type: api.CommunityAction_ADD, Communities: []string{LearnedExternalCommunity}}}},
		// A sibling's copy is tagged, and its MED raised so that a path we have first hand
		// always wins over it (GoBGP would otherwise decide on the sibling's router ID and
		// pass its copy on instead of the client's own route).
		{Name: "tabby-import-pools-from-sibling", Conditions: &api.Conditions{NeighborSet: match(setSiblings), PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ACCEPT,
				Community: &api.CommunityAction{Type: api.CommunityAction_ADD, Communities: []string{LearnedSiblingCommunity}},
				Med:       &api.MedAction{Type: api.MedAction_MOD, Value: 1}}},
		{Name: "tabby-import-pools", Conditions: &api.Conditions{PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ACCEPT, Community: stripSibling}},
	}}
	exp := &api.Policy{Name: "tabby-export", Statements: []*api.Statement{
		{Name: "tabby-export-no-transit", Conditions: &api.Conditions{CommunitySet: match(setLearned)},
			Actions: &api.Actions{RouteAction: api.RouteAction_REJECT}},
		// On export the neighbor set matches the receiving peer. A policy reject (unlike
		// GoBGP's CLUSTER_LIST check) withdraws what the sibling had from us before.
		{Name: "tabby-export-not-to-siblings", Conditions: &api.Conditions{NeighborSet: match(setSiblings), CommunitySet: match(setFromSib)},
			Actions: &api.Actions{RouteAction: api.RouteAction_REJECT}},
		// Service CIDRs go to external routers (ECMP over every node that peers with them),
		// never to other nodes.
		{Name: "tabby-export-services-to-external", Conditions: &api.Conditions{NeighborSet: match(setExternal), PrefixSet: match(setServices)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ACCEPT}},
		{Name: "tabby-export-services-not-inside", Conditions: &api.Conditions{PrefixSet: match(setServices)},
			Actions: &api.Actions{RouteAction: api.RouteAction_REJECT}},
		{Name: "tabby-export-pools-keep-next-hop", Conditions: &api.Conditions{NeighborSet: match(setKeepNH), PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ACCEPT, Nexthop: &api.NexthopAction{Unchanged: true}, Community: stripSibling}},
		{Name: "tabby-export-pools", Conditions: &api.Conditions{PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ACCEPT, Community: stripSibling}},
	}}
	// SetPolicies replaces sets and policies but ignores assignments: assign separately.
	if err := g.srv.SetPolicies(ctx, &api.SetPoliciesRequest{DefinedSets: sets, Policies: []*api.Policy{imp, exp}}); err != nil {
		return fmt.Errorf("set import/export policy: %w", err)
	}
	for _, a := range []*api.PolicyAssignment{
		{Name: "global", Direction: api.PolicyDirection_IMPORT, Policies: []*api.Policy{{Name: imp.Name}}, DefaultAction: api.RouteAction_REJECT},
		{Name: "global", Direction: api.PolicyDirection_EXPORT, Policies: []*api.Policy{{Name: exp.Name}}, DefaultAction: api.RouteAction_REJECT},
	} {
		if err := g.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: a}); err != nil {
			return fmt.Errorf("assign %s policy: %w", a.Direction, err)
		}
	}
	// GoBGP keeps every received route before policy: re-run the policy where it changed. Our
	// own prefixes change with every block and borrowed address but only filter what external
	// routers send, so they re-run the import from those alone.
	last := g.lastPolicy
	g.lastPolicy = &p
	if last == nil || !slices.Equal(last.Pools, p.Pools) || !slices.Equal(last.KeepNextHop, p.KeepNextHop) || !slices.Equal(last.Siblings, p.Siblings) || !slices.Equal(last.Services, p.Services) {
		if err := g.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: "all", Soft: true, Direction: api.ResetPeerRequest_BOTH}); err != nil {
			return fmt.Errorf("re-apply policy: %w", err)
		}
		return nil
	}
	if slices.Equal(last.Local, p.Local) && slices.Equal(last.External, p.External) {
		return nil
	}
	states, err := g.Peers(ctx)
	if err != nil {
		return err
	}
	for _, st := range states {
		if slices.Contains(p.External, st.Address) {
			if err := g.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: st.Address.String(), Soft: true, Direction: api.ResetPeerRequest_IN}); err != nil {
				return fmt.Errorf("re-apply import policy for %s: %w", st.Address, err)
			}
		}
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

var sessionStates = map[api.PeerState_SessionState]string{
	api.PeerState_IDLE:        "idle",
	api.PeerState_CONNECT:     "connect",
	api.PeerState_ACTIVE:      "active",
	api.PeerState_OPENSENT:    "opensent",
	api.PeerState_OPENCONFIRM: "openconfirm",
	api.PeerState_ESTABLISHED: "established",
}

// Watch implements Speaker. Best paths come from GoBGP's BEST watch with Init, so a watcher
// started after routes arrived still sees them all.
func (g *GoBGP) Watch(ctx context.Context, fn func(Event)) error {
	g.mu.Lock()
	g.watches = append(g.watches, fn)
	g.mu.Unlock()
	req := &api.WatchEventRequest{
		Peer:  &api.WatchEventRequest_Peer{},
		Table: &api.WatchEventRequest_Table{Filters: []*api.WatchEventRequest_Table_Filter{{Type: api.WatchEventRequest_Table_Filter_BEST, Init: true}}},
	}
	return g.srv.WatchEvent(ctx, req, func(r *api.WatchEventResponse) {
		now := time.Now()
		if pe := r.GetPeer(); pe != nil && pe.Type == api.WatchEventResponse_PeerEvent_STATE {
			st := pe.Peer.GetState()
			addr, err := netip.ParseAddr(st.GetNeighborAddress())
			if err != nil {
				return
			}
			fn(Event{Type: PeerStateChanged, Peer: addr, State: sessionStates[st.GetSessionState()], Time: now})
			return
		}
		for _, p := range r.GetTable().GetPaths() {
			e, err := bestEvent(p)
			if err != nil {
				g.log.Warn("ignoring a best path GoBGP reported", "error", err)
				continue
			}
			e.Time = now
			fn(e)
		}
	})
}

func bestEvent(p *api.Path) (Event, error) {
	var nlri api.IPAddressPrefix
	if err := p.GetNlri().UnmarshalTo(&nlri); err != nil {
		return Event{}, fmt.Errorf("NLRI: %w", err)
	}
	addr, err := netip.ParseAddr(nlri.Prefix)
	if err != nil {
		return Event{}, fmt.Errorf("NLRI prefix %q: %w", nlri.Prefix, err)
	}
	e := Event{Type: BestPath, Prefix: netip.PrefixFrom(addr, int(nlri.PrefixLen)).Masked(), Withdrawn: p.GetIsWithdraw()}
	// Local paths come with the source "<nil>": leave Peer zero for them.
	e.Peer, _ = netip.ParseAddr(p.GetNeighborIp())
	for _, a := range p.GetPattrs() {
		var nh api.NextHopAttribute
		if a.MessageIs(&nh) {
			if err := a.UnmarshalTo(&nh); err == nil {
				e.NextHop, _ = netip.ParseAddr(nh.NextHop)
			}
		}
	}
	return e, nil
}

// Peers implements Speaker.
func (g *GoBGP) Peers(ctx context.Context) ([]PeerState, error) {
	var out []PeerState
	err := g.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		addr, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		ps := PeerState{Address: addr, State: sessionStates[p.GetState().GetSessionState()]}
		ts := p.GetTimers().GetState()
		if ps.State == "established" && ts.GetUptime() != nil {
			ps.Since = ts.GetUptime().AsTime()
		} else if ts.GetDowntime() != nil {
			ps.Since = ts.GetDowntime().AsTime()
		}
		for _, af := range p.GetAfiSafis() {
			ps.Received += af.GetState().GetAccepted()
			ps.Sent += af.GetState().GetAdvertised()
			ps.EORReceived = ps.EORReceived || af.GetMpGracefulRestart().GetState().GetEndOfRibReceived()
		}
		out = append(out, ps)
	})
	if err != nil {
		return nil, fmt.Errorf("list peers: %w", err)
	}
	return out, nil
}

func uint8Field(v any) (uint8, bool) {
	switch x := v.(type) {
	case uint8:
		return x, true
	case int:
		return uint8(x), true
	case string:
		n, err := strconv.Atoi(x)
		return uint8(n), err == nil
	}
	return 0, false
}
