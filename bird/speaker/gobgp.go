package speaker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
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
