package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/trim"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
)

// Syncer watches the datastore and, after every change, sends the agents what changed as typed
// messages (OnUpdate: apis/model's, and felix's pods' addresses) and hands them a fresh Snapshot
// (OnSnapshot). Bursts of events coalesce into one pass: the agents always get each changed
// object's latest state, never a queue of stale ones.
type Syncer struct {
	nodeName   string
	log        *slog.Logger
	onSnapshot func(Snapshot)
	onUpdate   func(msgs []any)
	metrics    *Metrics

	nodes, pools, blocks, configs, peers, secrets cache.SharedIndexInformer
	// handlers are the informers' event handlers, by resource.
	handlers map[string]cache.ResourceEventHandler
	changed  chan struct{}

	mu      sync.Mutex
	pending Changes // what changed since the last pass
	// since: when the oldest event of pending arrived (zero while none did), for the lag.
	since time.Time
	// dirty: the objects that changed since the last pass, by kind and informer key. A pass
	// looks at these, not at every object: a pod replaced on one node of a thousand costs each
	// agent one block, whatever the cluster's size, and a node joining costs one node.
	dirty dirtyKeys

	// Only the Run loop touches what follows.
	cache *viewCache
	// stream: what was sent on the change stream (nil without OnUpdate).
	stream *stream
	// prev: the last snapshot handed out (nil before the first pass, and without OnSnapshot).
	prev   *Snapshot
	passed bool // the first pass is done
}

// dirtyKeys are the keys of the objects that changed, by kind.
type dirtyKeys struct {
	nodes, pools, blocks, configs, peers, secrets map[string]struct{}
}

func newDirtyKeys() dirtyKeys {
	return dirtyKeys{nodes: map[string]struct{}{}, pools: map[string]struct{}{}, blocks: map[string]struct{}{},
		configs: map[string]struct{}{}, peers: map[string]struct{}{}, secrets: map[string]struct{}{}}
}

// take hands over the keys and leaves empty sets for the handlers; s.mu must be held. A set
// without keys stays: most passes make no new map.
func (d *dirtyKeys) take() dirtyKeys {
	out := *d
	for _, m := range []*map[string]struct{}{&d.nodes, &d.pools, &d.blocks, &d.configs, &d.peers, &d.secrets} {
		if len(*m) > 0 {
			*m = map[string]struct{}{}
		}
	}
	return out
}

// Config says what to watch.
type Config struct {
	NodeName string
	// Namespace holds the Secrets that BGP passwords refer to (tabby-node's own namespace).
	Namespace string
	// OnUpdate, when set, is sent each pass's changes, in order: the first pass after the caches
	// synced sends every object as an update and ends with model.InSync; the next ones send
	// only what changed (model's updates.go, felix.PodIPsUpdate then felix.PodIPsDelta). A pass
	// in which nothing tabby reads changed sends nothing.
	OnUpdate func(msgs []any)
	// OnSnapshot, when set, is handed a Snapshot after every pass.
	OnSnapshot func(Snapshot)
	Logger     *slog.Logger
	// Metrics, when set, count the watch events and time the passes.
	Metrics *Metrics
}

// New builds a syncer over c.
func New(c *client.Client, cfg Config) *Syncer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Syncer{nodeName: cfg.NodeName, log: cfg.Logger, onSnapshot: cfg.OnSnapshot, onUpdate: cfg.OnUpdate, metrics: cfg.Metrics,
		changed: make(chan struct{}, 1), pending: ChangedAll, dirty: newDirtyKeys(), cache: newViewCache(), handlers: map[string]cache.ResourceEventHandler{}}
	if cfg.OnUpdate != nil {
		s.stream = newStream()
	}
	// The caches keep only what a pass reads: managedFields are often the larger part of an
	// object, and a Node's images and conditions are of no use to tabby.
	s.nodes = client.Informer(c.Nodes(), trim.Object)
	if cfg.Namespace != "" {
		s.secrets = client.Informer(c.Secrets(cfg.Namespace), trim.Object)
	}
	s.pools = client.Informer(c.IPPools(), trim.Object)
	s.blocks = client.Informer(c.IPAMBlocks(), trim.Object)
	s.configs = client.Informer(c.BGPConfigurations(), trim.Object)
	s.peers = client.Informer(c.BGPPeers(), trim.Object)
	for _, k := range []struct {
		inf      cache.SharedIndexInformer
		resource string
		kind     Changes
		dirty    func(*dirtyKeys) map[string]struct{}
	}{
		{s.nodes, "nodes", ChangedNodes, func(d *dirtyKeys) map[string]struct{} { return d.nodes }},
		{s.pools, "ippools", ChangedPools, func(d *dirtyKeys) map[string]struct{} { return d.pools }},
		{s.blocks, "ipamblocks", ChangedBlocks, func(d *dirtyKeys) map[string]struct{} { return d.blocks }},
		{s.configs, "bgpconfigurations", ChangedBGP, func(d *dirtyKeys) map[string]struct{} { return d.configs }},
		{s.peers, "bgppeers", ChangedBGP, func(d *dirtyKeys) map[string]struct{} { return d.peers }},
		{s.secrets, "secrets", ChangedSecrets, func(d *dirtyKeys) map[string]struct{} { return d.secrets }},
	} {
		if k.inf == nil {
			continue
		}
		h := s.handler(k.resource, k.kind, k.dirty)
		s.handlers[k.resource] = h
		_, _ = k.inf.AddEventHandler(h)
	}
	return s
}

// handler records an informer's events: the object's key as dirty, its kind as pending.
func (s *Syncer) handler(resource string, kind Changes, dirty func(*dirtyKeys) map[string]struct{}) cache.ResourceEventHandlerFuncs {
	changed := func(obj any) {
		s.mu.Lock()
		if s.since.IsZero() {
			s.since = time.Now()
		}
		s.pending |= kind
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			dirty(&s.dirty)[key] = struct{}{}
		}
		s.mu.Unlock()
		s.metrics.event(resource) // after since: whoever sees the count sees the lag's start
		s.kick()
	}
	update := func(_, cur any) { changed(cur) }
	if kind == ChangedNodes {
		// Most Node updates are the kubelet's status (conditions, images, capacity): not
		// what tabby reads of a node, and in a large cluster a steady stream.
		update = func(old, cur any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := cur.(*corev1.Node)
			if ok1 && ok2 && sameNode(o, n) {
				s.metrics.event(resource)
				return
			}
			changed(cur)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: changed, UpdateFunc: update, DeleteFunc: changed}
}

// sameNode: nothing tabby reads of the node differs between the two versions.
func sameNode(a, b *corev1.Node) bool {
	na, _ := validation.ParseNode(a)
	nb, _ := validation.ParseNode(b)
	return na.Equal(nb)
}

func (s *Syncer) informers() []cache.SharedIndexInformer {
	out := []cache.SharedIndexInformer{s.nodes, s.pools, s.blocks, s.configs, s.peers}
	if s.secrets != nil {
		out = append(out, s.secrets)
	}
	return out
}

func (s *Syncer) kick() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Kick asks for a new snapshot although nothing changed in the datastore (time passed: a restart
// deadline expired); the nodes count as changed, as their restart marks are what expire. The
// change stream carries no time: nothing is sent on it for a kick.
func (s *Syncer) Kick() {
	s.mu.Lock()
	s.pending |= ChangedNodes
	s.mu.Unlock()
	s.kick()
}

// Run watches until ctx ends. The first pass comes once every cache has synced.
func (s *Syncer) Run(ctx context.Context) error {
	var synced []cache.InformerSynced
	for _, inf := range s.informers() {
		go inf.RunWithContext(ctx)
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("datastore caches did not sync: %w", ctx.Err())
	}
	s.log.Info("datastore synced")
	s.kick()
	pace := newPacer()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
			// Under a stream of events that costly passes cannot keep up with (pods churning
			// across a large cluster), passes are spaced: each one then covers the events of
			// the interval, at most that much later (pacer).
			if wait := pace.wait(time.Now()); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
			s.mu.Lock()
			idle := s.pending == 0 && s.passed
			s.mu.Unlock()
			if idle {
				continue // a kick whose change the previous pass already took
			}
			start := time.Now()
			snap, msgs, since := s.pass()
			if s.onUpdate != nil && len(msgs) > 0 {
				s.onUpdate(msgs)
			}
			if s.onSnapshot != nil {
				s.onSnapshot(snap)
			}
			end := time.Now()
			pace.spent(end, end.Sub(start))
			s.metrics.observeSnapshot(since, start, end)
		}
	}
}

// pass brings the view cache up to date with what changed since the previous pass, and turns
// those changes into the messages of the change stream (with OnUpdate) and into the next
// snapshot (with OnSnapshot). Only the changed objects are read: every object in the first pass,
// after it the keys the informers' events marked dirty. It also says when the oldest event it
// holds arrived: zero for the first (its events waited for every cache to sync, not for a
// pass) and when no event came (a kick). Only the Run loop calls it.
func (s *Syncer) pass() (Snapshot, []any, time.Time) {
	s.mu.Lock()
	changed, since, dirty := s.pending, s.since, s.dirty.take()
	s.pending, s.since = 0, time.Time{}
	s.mu.Unlock()
	first := !s.passed
	if first {
		// Every object, from the caches as they are now: the keys of the events before (the
		// caches' initial lists) are among them.
		changed, since = ChangedAll, time.Time{}
		dirty = dirtyKeys{nodes: keys(s.nodes), pools: keys(s.pools), blocks: keys(s.blocks), configs: keys(s.configs), peers: keys(s.peers), secrets: keys(s.secrets)}
	}
	s.passed = true
	s.cache.updateBlocks(dirty.blocks, func(key string) *v1.IPAMBlock { return get[*v1.IPAMBlock](s.blocks, key) }, s.nodeName, s.log)
	s.cache.updateNodes(dirty.nodes, func(key string) *corev1.Node { return get[*corev1.Node](s.nodes, key) }, s.log)
	nodes, blocks := s.cache.takeChanges()
	var podIPs *PodIPsChange // the first pass hands out every pod's addresses instead
	if !first {
		podIPs = diffPodIPs(blocks)
	}

	var msgs []any
	if s.stream != nil {
		_, config := dirty.configs[v1.DefaultBGPConfigurationName]
		msgs = s.stream.messages(streamInputs{first: first, nodes: nodes, blocks: blocks,
			pools: dirty.pools, getPool: func(key string) *v1.IPPool { return get[*v1.IPPool](s.pools, key) },
			peers: dirty.peers, getPeer: func(key string) *v1.BGPPeer { return get[*v1.BGPPeer](s.peers, key) },
			config: config, getConfig: s.bgpConfig,
			secrets: dirty.secrets, getSecret: func(key string) *corev1.Secret { return get[*corev1.Secret](s.secrets, key) },
			podIPs: s.cache.podIPs, podIPsChange: podIPs,
		}, s.log)
	}
	var snap Snapshot
	if s.onSnapshot != nil {
		snap = s.snapshot(changed, nodes, blocks, podIPs)
	}
	return snap, msgs, since
}

// snapshot is the snapshot after the previous one, with what changed: only those inputs are
// built again, the others are the previous snapshot's (nothing modifies a snapshot once handed
// out); the nodes and blocks from the view cache's changes, the blocks' part built again only
// when one of them moved a route.
func (s *Syncer) snapshot(changed Changes, nodes []nodeChange, blocks []blockChange, podIPs *PodIPsChange) Snapshot {
	prev := s.prev
	log := s.log
	if s.stream != nil {
		log = discard // the stream's pass reported the invalid objects
	}
	in := Inputs{NodeName: s.nodeName}
	if changed&ChangedPools != 0 {
		in.Pools = list[*v1.IPPool](s.pools)
	}
	if changed&ChangedBGP != 0 {
		in.BGPPeers = list[*v1.BGPPeer](s.peers)
		in.BGPConfig = s.bgpConfig()
	}
	if changed&ChangedSecrets != 0 && s.secrets != nil {
		in.Secrets = list[*corev1.Secret](s.secrets)
	}
	snap := Build(in, log)
	if prev == nil {
		snap.Nodes = nextNodes(nil, nodes)
		snap.Local = localNode(snap.Nodes, s.nodeName)
		snap.setBlocks(s.cache.views)
		snap.PodIPs = s.cache.podIPs()
		s.prev = &snap
		return snap
	}
	if changed&ChangedNodes == 0 {
		snap.Nodes, snap.Local = prev.Nodes, prev.Local
	} else {
		snap.Nodes = nextNodes(prev.Nodes, nodes)
		snap.Local = localNode(snap.Nodes, s.nodeName)
	}
	changed &^= ChangedBlocks | ChangedPodIPs
	if routesChanged(blocks) {
		changed |= ChangedBlocks
		snap.setBlocks(s.cache.views)
	} else {
		snap.LocalBlocks, snap.Borrowed, snap.Routable, snap.Workloads = prev.LocalBlocks, prev.Borrowed, prev.Routable, prev.Workloads
	}
	snap.PodIPs, snap.PodIPsChanged = nil, podIPs
	if !podIPs.empty() {
		changed |= ChangedPodIPs
	}
	if changed&ChangedPools == 0 {
		snap.Pools = prev.Pools
	}
	if changed&ChangedBGP == 0 {
		snap.BGPConfig, snap.BGPPeers = prev.BGPConfig, prev.BGPPeers
	}
	if changed&ChangedSecrets == 0 {
		snap.Secrets = prev.Secrets
	}
	snap.Changed = changed
	s.prev = &snap
	return snap
}

// bgpConfig is the cluster's BGPConfiguration (the one named default), nil when there is none.
func (s *Syncer) bgpConfig() *v1.BGPConfiguration {
	return get[*v1.BGPConfiguration](s.configs, v1.DefaultBGPConfigurationName)
}

// discard is a logger for objects judged a second time.
var discard = slog.New(slog.DiscardHandler)

// get is the object the informer holds under key (nil: none).
func get[T runtime.Object](inf cache.SharedIndexInformer, key string) T {
	var none T
	if inf == nil {
		return none
	}
	obj, ok, _ := inf.GetStore().GetByKey(key)
	if !ok {
		return none
	}
	t, _ := obj.(T)
	return t
}

// keys are the informer's keys (none without an informer).
func keys(inf cache.SharedIndexInformer) map[string]struct{} {
	out := map[string]struct{}{}
	if inf == nil {
		return out
	}
	for _, k := range inf.GetStore().ListKeys() {
		out[k] = struct{}{}
	}
	return out
}

// HasSynced tells whether every cache has synced.
func (s *Syncer) HasSynced() bool {
	for _, inf := range s.informers() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// Pools are the IPPools as the informer holds them (ok once it has synced): the IPAM
// allocator's pools, so that no pod's ADD lists them from the API server.
func (s *Syncer) Pools() ([]v1.IPPool, bool) { return values[v1.IPPool](s.pools) }

// Blocks are the IPAMBlocks as the informer holds them (ok once it has synced), for the IPAM
// garbage collector's first look: a list of every block from the API server every minute on
// every node is what a large cluster cannot afford.
func (s *Syncer) Blocks() ([]v1.IPAMBlock, bool) { return values[v1.IPAMBlock](s.blocks) }

// Nodes are the Nodes as the informer holds them (ok once it has synced), parsed. Their
// annotations' errors are not reported again: the syncer's passes report them.
func (s *Syncer) Nodes() ([]model.Node, bool) {
	if !s.nodes.HasSynced() {
		return nil, false
	}
	items := s.nodes.GetStore().List()
	out := make([]model.Node, 0, len(items))
	for _, it := range items {
		n, _ := validation.ParseNode(it.(*corev1.Node))
		out = append(out, n)
	}
	return out, true
}

// values copies the informer's objects (shallowly: nothing may modify what they point to).
func values[T any](inf cache.SharedIndexInformer) ([]T, bool) {
	if !inf.HasSynced() {
		return nil, false
	}
	items := inf.GetStore().List()
	out := make([]T, 0, len(items))
	for _, it := range items {
		out = append(out, *it.(*T))
	}
	return out, true
}

func list[T runtime.Object](inf cache.SharedIndexInformer) []T {
	items := inf.GetStore().List()
	out := make([]T, 0, len(items))
	for _, it := range items {
		out = append(out, it.(T))
	}
	return out
}
