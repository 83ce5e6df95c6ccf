package bird

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/apis/model"
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
	// Routes receives a model.RouteUpdate or model.RouteRemove for every change of a route
	// learned from peers (its best path, the paths of equal cost) inside a pool, or outside
	// the pools from an external router, in order, one call at a time. It must not block for
	// long.
	Routes func(msg any)
	// WaitForInSync: no session opens before model.InSync, so that a peer that gets our
	// End-of-RIB (sent as soon as a session is up) has every prefix of this node before it.
	WaitForInSync bool
	Logger        *slog.Logger
	// NewSpeaker makes the BGP speaker; nil = embedded GoBGP.
	NewSpeaker func(log *slog.Logger, apiAddr string) (speaker.Speaker, error)
}

// PeerStatus is one session as the status service shows it.
type PeerStatus = status.PeerStatus

// Bird is tabby's BGP agent on one node. The model's messages (OnUpdate) say what the cluster
// is; a pass (CompleteDeferredWork, run by Run) brings the speaker in line with it, one
// concern at a time (reconcile.go), and only the concerns a message could change.
type Bird struct {
	cfg    Config
	listen netip.Addr // cfg.ListenAddress parsed
	log    *slog.Logger

	kick chan struct{}

	mu sync.Mutex
	in inputs
	// dirty: the concerns the next pass must bring in line.
	dirty dirtySet
	// explainedUnused: the policy in place has no external router, so the explained prefixes
	// are not in it, and a block claimed or released elsewhere does not wake the agent.
	explainedUnused bool
	// What the pass publishes for the status service, the metrics and the session events.
	spk         speaker.Speaker
	spkCancel   context.CancelFunc
	speakerCfg  peers.Speaker
	started     time.Time
	problems    []string
	desired     map[netip.Addr]peers.Peer // every wanted session, also those that cannot open
	configuredN int                       // sessions configured in the speaker
	advertisedN int                       // paths advertised
	sessions    map[netip.Addr]*session
	told        map[netip.Prefix]model.RouteUpdate // learned routes handed to Config.Routes
	// best is GoBGP's best path to each prefix learned from a peer, received every peer's
	// path after the import policy (learned.go).
	best     map[netip.Prefix]bestPath
	received map[netip.Prefix]map[netip.Addr]candidate
	// shown are the told routes status lists: over several paths, or external.
	shown map[netip.Prefix]struct{}
	// tellMu keeps Config.Routes's calls one at a time, in the order they were decided.
	tellMu     sync.Mutex
	lastUpdate time.Time
	lastErr    string
	stopped    bool
	stopCh     chan struct{}

	// The pass's own: one pass at a time.
	passMu     sync.Mutex
	computed   peers.Result // the sessions as last computed
	computedOK bool
	computes   int // computations of the sessions (tests: what a message costs)
	// sessionsPolicy is the part of the policy the computed sessions make.
	sessionsPolicy speaker.Policy
	lastProblems   string
	speakerRec     speakerReconciler
	paths          pathReconciler
	policy         policyReconciler
	neighbors      neighborReconciler

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
	flush         bool // lost without a restart mark: drop its routes (the neighbor reconciler does it)
	hardReset     bool // the peer's last NOTIFICATION was a Hard Reset: GoBGP dropped its routes itself
	inGR          bool // lost while restarting: routes kept until it is back or the mark ends
	// upSinceAdded: established at least once since the peer was (re)added to the speaker;
	// until then the speaker holds no route from it.
	upSinceAdded bool
	redial       bool // a tabby node refused our first connection: re-add the peer (see onState)
	redials      int  // re-adds since the session was last established
	// bfdDown: BFD declared the peer down while the session was up; the session's end that
	// follows drops the peer's routes at once, a router's included (docs/architecture.md, "BFD").
	bfdDown  bool
	bfdDowns uint64 // times BFD declared the peer down, for the metrics
	// explained: since the session was established GoBGP logged something that ends a
	// session (a warning such as a hold-timer expiry, a NOTIFICATION either way). A session
	// that ends unexplained was closed by the peer's kernel: see onState.
	explained bool
}

// New returns a Bird; Run starts it.
func New(cfg Config) (*Bird, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("bird: Config.NodeName is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var listen netip.Addr
	if cfg.ListenAddress != "" {
		var err error
		if listen, err = netip.ParseAddr(cfg.ListenAddress); err != nil {
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
	log := cfg.Logger.With("component", "bird")
	b := &Bird{
		cfg:       cfg,
		listen:    listen,
		log:       log,
		kick:      make(chan struct{}, 1),
		in:        newInputs(cfg.NodeName),
		dirty:     dirtyAll,
		desired:   map[netip.Addr]peers.Peer{},
		sessions:  map[netip.Addr]*session{},
		told:      map[netip.Prefix]model.RouteUpdate{},
		best:      map[netip.Prefix]bestPath{},
		received:  map[netip.Prefix]map[netip.Addr]candidate{},
		shown:     map[netip.Prefix]struct{}{},
		stopCh:    make(chan struct{}),
		paths:     pathReconciler{advertised: map[netip.Prefix]netip.Addr{}},
		neighbors: neighborReconciler{log: log, configured: map[netip.Addr]peers.Peer{}},
	}
	b.speakerRec = speakerReconciler{log: log, onEvent: b.onEvent,
		newSpeaker: func() (speaker.Speaker, error) { return cfg.NewSpeaker(cfg.Logger, cfg.GoBGPAPI) }}
	b.metrics = newMetrics(b)
	return b, nil
}

func (b *Bird) trigger() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// OnUpdate records one of the model's messages (apis/model/updates.go): NodeUpdate/NodeRemove
// (every node, this one included), PoolUpdate/PoolRemove, BlockUpdate/BlockRemove,
// BGPConfigurationUpdate, BGPPeerUpdate/BGPPeerRemove, SecretUpdate/SecretRemove and InSync;
// it ignores the others. It marks what the message can change and wakes Run, whose next pass
// brings only that in line. It is safe to call from any goroutine.
func (b *Bird) OnUpdate(msg any) {
	b.mu.Lock()
	d := b.in.record(msg, !b.explainedUnused)
	b.dirty |= d
	b.mu.Unlock()
	if d != 0 {
		b.trigger()
	}
}

// OnUpdates records msgs (the syncer's pass) as one change: no pass sees part of them.
func (b *Bird) OnUpdates(msgs []any) {
	b.mu.Lock()
	var d dirtySet
	for _, m := range msgs {
		d |= b.in.record(m, !b.explainedUnused)
	}
	b.dirty |= d
	b.mu.Unlock()
	if d != 0 {
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
		if err := b.CompleteDeferredWork(ctx); err != nil {
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
			// Only time-bound work wakes a pass: in a large cluster a pass every tick would be
			// what an idle tabby-node spends its CPU on.
			b.ticks.Add(1)
			if b.timedWork() {
				return true
			}
		}
	}
}

// timedWork tells whether the next pass has something that only time brings: a retry of what
// failed (still marked), or a graceful restart window that may have ended (it marks the
// neighbors, whose reconciler ends it).
func (b *Bird) timedWork() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dirty != 0 {
		return true
	}
	for _, s := range b.sessions {
		if s.inGR {
			b.dirty |= dirtyNeighbors
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
	// holds up every session's message handling, keepalives included. On a route reflector
	// with many clients a steady poll took CPU from the sessions and let hold timers expire
	// while its clients were still converging (hack/bench/rrscale); so the poll backs off from
	// syncPollMin, and a quick sync is still seen soon.
	wait := syncPollMin
	for {
		b.mu.Lock()
		spk, started, configured := b.spk, b.started, b.configuredN
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
