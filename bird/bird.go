package bird

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
	"github.com/tabbynet/tabby/bird/status"
)

// Config configures a Bird.
type Config struct {
	NodeName string
	// ListenAddress: "" listens on the node's BGP address (the usual case); "0.0.0.0" on all.
	ListenAddress string
	// GoBGPAPI is where GoBGP's own gRPC API listens: a loopback address such as
	// "127.0.0.1:50051", or "" for none.
	GoBGPAPI string
	// StatusSocket is the unix socket of the status service (status.DefaultSocket); "" = none.
	StatusSocket string
	// OnRoute receives every change of a best path learned from a peer inside an IPPool, in
	// order, from one goroutine. It must not block for long.
	OnRoute func(RouteUpdate)
	Logger  *slog.Logger
	// NewSpeaker makes the BGP speaker; nil = embedded GoBGP.
	NewSpeaker func(log *slog.Logger, apiAddr string) (speaker.Speaker, error)
}

// Node is a tabby node as the lead reads it from the Kubernetes Node (annotations).
type Node struct {
	Name        string
	Labels      map[string]string
	Address     netip.Prefix // tabby.dev/bgp-ipv4-address
	Address6    netip.Prefix // tabby.dev/bgp-ipv6-address; invalid: no IPv6
	ASN         uint32       // tabby.dev/bgp-asn; 0 = BGPConfiguration / default
	RRClusterID string       // tabby.dev/route-reflector-cluster-id
	// RestartingUntil marks a planned restart of the node (annotation tabby.dev/bgp-restarting,
	// RFC 3339): until then, a lost session with it is a graceful restart and its routes stay.
	// A restart of tabby-node alone needs no mark: its Stop(true) tells the peers (see doc.go).
	RestartingUntil time.Time
}

// RouteUpdate is a route learned over BGP for felix to program.
type RouteUpdate struct {
	Prefix    netip.Prefix
	NextHop   netip.Addr
	Withdrawn bool
}

// PeerStatus is one session as the status service shows it.
type PeerStatus = status.PeerStatus

// Bird is tabby's BGP agent on one node.
type Bird struct {
	cfg Config
	log *slog.Logger

	kick chan struct{}

	mu sync.Mutex
	// inputs
	nodes   []Node
	bgpConf *v1.BGPConfiguration
	bgpPeer []v1.BGPPeer
	secrets map[string]map[string][]byte
	pools   []netip.Prefix
	local   []netip.Prefix
	// routable: what IPAM explains inside the pools, cluster-wide (SetRoutable).
	routable []netip.Prefix
	// routableUnused: the policy in place has no external router, so routable is not in it;
	// a change of routable alone then changes nothing and does not wake reconcile.
	routableUnused bool
	// peerInputs counts changes of what the sessions are computed from (nodes, BGP
	// configuration, BGPPeers, Secrets); computed is the result for computedAt. A block claimed
	// or released anywhere in the cluster wakes every agent's reconcile, and must not make it
	// compute every session again.
	peerInputs, computedAt uint64
	computed               *peers.Result
	// applied state
	spk          speaker.Speaker
	spkCancel    context.CancelFunc
	starting     speaker.Speaker // created, Start failed: retried (only Run touches it)
	lastProblems string          // only Run touches it
	problems     []string        // the same, for Status (under mu)
	started      time.Time
	speakerCfg   peers.Speaker
	desired      map[netip.Addr]peers.Peer // every wanted session, also those that cannot open
	configured   map[netip.Addr]peers.Peer // sessions configured in the speaker
	paths        map[netip.Prefix]bool
	policy       *speaker.Policy
	sessions     map[netip.Addr]*session
	told         map[netip.Prefix]netip.Addr // learned routes handed to OnRoute
	lastUpdate   time.Time
	lastErr      string
	stopped      bool
	stopCh       chan struct{}

	metrics    *metrics
	reconciles atomic.Int64
	ticks      atomic.Int64 // timer ticks Run has handled (tests wait for ticks, not the clock)
}

// session is what bird knows about a peer beyond the speaker.
type session struct {
	state string
	since time.Time
	info  string
	// gracefulUntil: the peer announced a graceful restart (RFC 8538 Cease with tabby's
	// communication) and may come back until then.
	gracefulUntil time.Time
	flush         bool // lost without a restart mark: drop its routes (reconcile does it)
	hardReset     bool // the peer's last NOTIFICATION was a Hard Reset: GoBGP dropped its routes itself
	inGR          bool // lost while restarting: routes kept until it is back or the mark ends
	// upSinceAdded: established at least once since the peer was (re)added to the speaker;
	// until then the speaker holds no route from it.
	upSinceAdded bool
	redial       bool // a tabby node refused our first connection: re-add the peer (see onState)
	redials      int  // re-adds since the session was last established
}

// New returns a Bird; Run starts it.
func New(cfg Config) (*Bird, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("bird: Config.NodeName is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ListenAddress != "" {
		if _, err := netip.ParseAddr(cfg.ListenAddress); err != nil {
			return nil, fmt.Errorf("bird: Config.ListenAddress %q: %w", cfg.ListenAddress, err)
		}
	}
	if cfg.NewSpeaker == nil {
		cfg.NewSpeaker = func(log *slog.Logger, apiAddr string) (speaker.Speaker, error) {
			return speaker.NewGoBGP(log, apiAddr)
		}
	}
	if _, err := cfg.NewSpeaker(cfg.Logger, cfg.GoBGPAPI); err != nil { // validate early
		return nil, fmt.Errorf("bird: %w", err)
	}
	b := &Bird{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "bird"),
		kick:       make(chan struct{}, 1),
		configured: map[netip.Addr]peers.Peer{},
		desired:    map[netip.Addr]peers.Peer{},
		paths:      map[netip.Prefix]bool{},
		sessions:   map[netip.Addr]*session{},
		told:       map[netip.Prefix]netip.Addr{},
		stopCh:     make(chan struct{}),
	}
	b.metrics = newMetrics(b)
	return b, nil
}

func (b *Bird) trigger() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// SetNodes sets every node of the cluster, this one included.
func (b *Bird) SetNodes(nodes []Node) {
	b.mu.Lock()
	b.nodes = slices.Clone(nodes)
	b.peerInputs++
	b.mu.Unlock()
	b.trigger()
}

// SetBGPConfiguration sets the cluster's BGPConfiguration; nil means defaults.
func (b *Bird) SetBGPConfiguration(c *v1.BGPConfiguration) {
	b.mu.Lock()
	b.bgpConf = c
	b.peerInputs++
	b.mu.Unlock()
	b.trigger()
}

// SetBGPPeers sets every BGPPeer.
func (b *Bird) SetBGPPeers(p []v1.BGPPeer) {
	b.mu.Lock()
	b.bgpPeer = slices.Clone(p)
	b.peerInputs++
	b.mu.Unlock()
	b.trigger()
}

// SetSecrets sets the Secrets of tabby-node's namespace (name → data) that passwords refer to.
func (b *Bird) SetSecrets(s map[string]map[string][]byte) {
	b.mu.Lock()
	b.secrets = s
	b.peerInputs++
	b.mu.Unlock()
	b.trigger()
}

// SetPools sets the IPPool CIDRs: the only prefixes accepted from or advertised to peers.
func (b *Bird) SetPools(p []netip.Prefix) {
	b.mu.Lock()
	b.pools = slices.Clone(p)
	b.mu.Unlock()
	b.trigger()
}

// SetRoutable sets the prefixes inside the pools that IPAM explains, cluster-wide: every
// block's prefix and every borrowed /32. From an external router only these are accepted
// inside a pool (a ToR cannot pull part of a block away from its node).
func (b *Bird) SetRoutable(p []netip.Prefix) {
	p = sortedPrefixes(p)
	b.mu.Lock()
	same := slices.Equal(b.routable, p)
	b.routable = p
	unused := b.routableUnused
	b.mu.Unlock()
	// Every block claimed or released in the cluster changes it: without an external router
	// (a mesh, reflectors and their clients) no agent has anything to do about it.
	if !same && !unused {
		b.trigger()
	}
}

// SetLocalPrefixes sets the prefixes this node advertises (its blocks and borrowed /32s).
func (b *Bird) SetLocalPrefixes(p []netip.Prefix) {
	b.mu.Lock()
	same := slices.Equal(b.local, p)
	b.local = slices.Clone(p)
	b.mu.Unlock()
	if !same {
		b.trigger()
	}
}

// Run reconciles the speaker with the inputs until ctx is done or Stop is called. It does not
// stop the speaker when ctx ends: call Stop, choosing how peers should see the shutdown.
func (b *Bird) Run(ctx context.Context) error {
	if b.cfg.StatusSocket != "" {
		errc := make(chan error, 1)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { errc <- status.Serve(sctx, b.cfg.StatusSocket, b) }()
		defer func() {
			cancel()
			if err := <-errc; err != nil {
				b.log.Error("status service stopped", "error", err)
			}
		}()
	}
	tick := time.NewTicker(time.Second) // restart deadlines and retries; everything else is event driven
	defer tick.Stop()
	for {
		if err := b.reconcile(ctx); err != nil {
			b.mu.Lock()
			if msg := err.Error(); msg != b.lastErr {
				b.log.Error("BGP reconcile failed; retrying", "error", err)
				b.lastErr = msg
			}
			b.mu.Unlock()
		}
		if !b.waitForWork(ctx, tick.C) {
			return nil
		}
	}
}

// waitForWork waits for a change, or a tick that brings time-bound work; false when stopped.
func (b *Bird) waitForWork(ctx context.Context, tick <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-b.stopCh:
			return false
		case <-b.kick:
			return true
		case <-tick:
			// A reconcile computes every peer from every node: in a large cluster a reconcile
			// a second was most of an idle tabby-node's CPU. Only time-bound work wakes it.
			b.ticks.Add(1)
			if b.timedWork() {
				return true
			}
		}
	}
}

// timedWork tells whether the next reconcile has something that only time brings: a retry after
// a failure, or a graceful restart window that may have ended. Only Run calls it.
func (b *Bird) timedWork() bool {
	if b.starting != nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastErr != "" {
		return true
	}
	for _, s := range b.sessions {
		if s.inGR {
			return true
		}
	}
	return false
}

// Stop stops the speaker. restart=true is the graceful-restart-style shutdown of a tabby-node
// that will be back: peers keep our routes (as stale) until we re-advertise them or their
// restart time ends. restart=false withdraws everything at once at every peer.
func (b *Bird) Stop(restart bool) error {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	b.stopped = true
	close(b.stopCh)
	spk, cancel := b.spk, b.spkCancel
	b.mu.Unlock()
	if spk == nil {
		return nil
	}
	ctx, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	err := spk.Stop(ctx, restart)
	cancel()
	if err != nil {
		return fmt.Errorf("stop BGP (restart=%v): %w", restart, err)
	}
	b.log.Info("BGP stopped", "graceful_restart", restart)
	return nil
}

// Collectors returns the Prometheus collectors of the BGP agent.
func (b *Bird) Collectors() []prometheus.Collector { return []prometheus.Collector{b.metrics} }

// WaitSynced blocks until the speaker has learned the routes of every peer that is up: each
// established session has delivered its End-of-RIB, and a session still down grace after the
// start is not waited for. After a restart, the dataplane keeps the routes it had and removes
// those not learned again only once this returns (re-learn, re-advertise, then remove stale).
func (b *Bird) WaitSynced(ctx context.Context, grace time.Duration) error {
	// Peers is GoBGP's ListPeer: it builds every peer under the server's exclusive lock, which
	// holds up every session's message handling, keepalives included. A route reflector with
	// 1,000 clients that polled it every 50 ms spent a fifth of its CPU there and let hold
	// timers expire while its clients were still converging (hack/bench/rrscale); so the
	// poll backs off, and a quick sync is still seen within 50-100 ms.
	wait := syncPollMin
	for {
		b.mu.Lock()
		spk, started, configured := b.spk, b.started, len(b.configured)
		wanted := 0
		for _, p := range b.desired {
			if p.Err == "" {
				wanted++
			}
		}
		b.mu.Unlock()
		if spk != nil && configured == wanted {
			states, err := spk.Peers(ctx)
			if err != nil {
				return err
			}
			synced := true
			for _, s := range states {
				up := s.State == "established"
				if (up && !s.EORReceived) || (!up && time.Since(started) < grace) {
					synced = false
				}
			}
			if synced {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for BGP to learn every peer's routes: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, syncPollMax)
	}
}

// The bounds of WaitSynced's poll interval.
const (
	syncPollMin = 50 * time.Millisecond
	syncPollMax = time.Second
)
