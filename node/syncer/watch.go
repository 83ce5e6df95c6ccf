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

// Syncer watches the datastore and hands a fresh Snapshot to OnSnapshot after every change.
// Bursts of events coalesce into one snapshot: the sink always sees the latest state, never a
// queue of stale ones.
type Syncer struct {
	nodeName   string
	log        *slog.Logger
	onSnapshot func(Snapshot)
	metrics    *Metrics

	nodes, pools, blocks, configs, peers, secrets cache.SharedIndexInformer
	changed                                       chan struct{}

	mu      sync.Mutex
	pending Changes // what changed since the last snapshot
	// since: when the oldest event of pending arrived (zero while none did), for the lag.
	since time.Time
	// dirtyBlocks: the IPAMBlocks that changed since the last snapshot, by informer key. A
	// snapshot looks at these, not at every block: a pod replaced on one node of a thousand
	// costs each agent one block, whatever the cluster's size.
	dirtyBlocks map[string]struct{}
	// dirtyNodes: the Nodes that changed since the last snapshot, by name; as for the blocks, a
	// node joining a cluster of a thousand costs a snapshot one node, not a list and a sort.
	dirtyNodes map[string]struct{}
	cache      *viewCache
	prev       *Snapshot
}

// Config says what to watch.
type Config struct {
	NodeName string
	// Namespace holds the Secrets that BGP passwords refer to (tabby-node's own namespace).
	Namespace  string
	OnSnapshot func(Snapshot)
	Logger     *slog.Logger
	// Metrics, when set, count the watch events and time the snapshots.
	Metrics *Metrics
}

// New builds a syncer over c.
func New(c *client.Client, cfg Config) *Syncer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Syncer{nodeName: cfg.NodeName, log: cfg.Logger, onSnapshot: cfg.OnSnapshot, metrics: cfg.Metrics, changed: make(chan struct{}, 1), pending: ChangedAll,
		dirtyBlocks: map[string]struct{}{}, dirtyNodes: map[string]struct{}{}, cache: newViewCache()}
	// The caches keep only what the snapshot reads: managedFields are often the larger part of an
	// object, and a Node's images and conditions are of no use to tabby.
	s.nodes = client.Informer(c.Nodes(), trim.Object)
	if cfg.Namespace != "" {
		s.secrets = client.Informer(c.Secrets(cfg.Namespace), trim.Object)
	}
	s.pools = client.Informer(c.IPPools(), trim.Object)
	s.blocks = client.Informer(c.IPAMBlocks(), trim.Object)
	s.configs = client.Informer(c.BGPConfigurations(), trim.Object)
	s.peers = client.Informer(c.BGPPeers(), trim.Object)
	resources := []string{"nodes", "ippools", "ipamblocks", "bgpconfigurations", "bgppeers", "secrets"}
	kinds := []Changes{ChangedNodes, ChangedPools, ChangedBlocks, ChangedBGP, ChangedBGP, ChangedSecrets}
	for i, inf := range s.informers() {
		res, kind := resources[i], kinds[i]
		changed := func(obj any) {
			s.mu.Lock()
			if s.since.IsZero() {
				s.since = time.Now()
			}
			s.pending |= kind
			if keys := s.dirtyOf(kind); keys != nil {
				if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
					keys[key] = struct{}{}
				}
			}
			s.mu.Unlock()
			s.metrics.event(res) // after since: whoever sees the count sees the lag's start
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
					s.metrics.event(res)
					return
				}
				changed(cur)
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    changed,
			UpdateFunc: update,
			DeleteFunc: changed,
		})
	}
	return s
}

// sameNode: nothing tabby reads of the node differs between the two versions.
func sameNode(a, b *corev1.Node) bool {
	na, _ := validation.ParseNode(a)
	nb, _ := validation.ParseNode(b)
	return na.Equal(nb)
}

// dirtyOf is where the changed objects of kind are kept by key (nil: that kind is listed
// whole); s.mu must be held.
func (s *Syncer) dirtyOf(kind Changes) map[string]struct{} {
	switch kind {
	case ChangedBlocks:
		return s.dirtyBlocks
	case ChangedNodes:
		return s.dirtyNodes
	}
	return nil
}

// takeKeys hands over the keys in *m (nil when there are none) and leaves an empty set for the
// handlers; s.mu must be held. The handlers keep an empty set: most snapshots make no new map.
func takeKeys(m *map[string]struct{}) map[string]struct{} {
	out := *m
	if len(out) == 0 {
		return nil
	}
	*m = map[string]struct{}{}
	return out
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
// deadline expired); the nodes count as changed, as their restart marks are what expire.
func (s *Syncer) Kick() {
	s.mu.Lock()
	s.pending |= ChangedNodes
	s.mu.Unlock()
	s.kick()
}

// Run watches until ctx ends. The first snapshot comes once every cache has synced.
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
			// Under a stream of events that costly snapshots cannot keep up with (pods churning
			// across a large cluster), snapshots are spaced: each one then covers the events of
			// the interval, at most that much later (pacer).
			if wait := pace.wait(time.Now()); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
			s.mu.Lock()
			idle := s.pending == 0 && s.prev != nil
			s.mu.Unlock()
			if idle {
				continue // a kick whose change the previous snapshot already took
			}
			start := time.Now()
			snap, since := s.snapshot()
			s.onSnapshot(snap)
			end := time.Now()
			pace.spent(end, end.Sub(start))
			s.metrics.observeSnapshot(since, start, end)
		}
	}
}

// snapshot builds the current snapshot from the caches, with what changed since the previous
// one: only those inputs are listed and built again, the others are the previous snapshot's
// (nothing modifies a snapshot once handed out). The blocks and nodes are listed for the first
// snapshot only; after it, only those that changed are read, and the blocks' part of the
// snapshot is built again only when one of them moved a route. Only the Run loop calls it (the view cache
// and the previous snapshot are its own). It also says when the oldest event it holds arrived:
// zero for the first (its events waited for every cache to sync, not for a snapshot) and when
// no event came (a kick).
func (s *Syncer) snapshot() (Snapshot, time.Time) {
	s.mu.Lock()
	changed, since := s.pending, s.since
	dirty, dirtyNodes := takeKeys(&s.dirtyBlocks), takeKeys(&s.dirtyNodes)
	s.pending, s.since = 0, time.Time{}
	s.mu.Unlock()
	prev := s.prev
	if prev == nil {
		changed, since = ChangedAll, time.Time{}
	}
	in := Inputs{NodeName: s.nodeName}
	listed := changed
	if prev == nil {
		in.Nodes = list[*corev1.Node](s.nodes)
	} else {
		listed &^= ChangedNodes
	}
	if changed&ChangedPools != 0 {
		in.Pools = list[*v1.IPPool](s.pools)
	}
	if prev == nil {
		in.Blocks = list[*v1.IPAMBlock](s.blocks)
	} else {
		listed &^= ChangedBlocks
	}
	if changed&ChangedBGP != 0 {
		in.BGPPeers = list[*v1.BGPPeer](s.peers)
		if obj, ok, _ := s.configs.GetStore().GetByKey(v1.DefaultBGPConfigurationName); ok {
			in.BGPConfig = obj.(*v1.BGPConfiguration)
		}
	}
	if changed&ChangedSecrets != 0 && s.secrets != nil {
		in.Secrets = list[*corev1.Secret](s.secrets)
	}
	snap := build(in, s.log, s.cache.listed(listed))
	if prev == nil {
		s.cache.takeChanges()
		snap.PodIPs = s.cache.podIPs()
		s.prev = &snap
		return snap, since
	}
	store := s.blocks.GetStore()
	s.cache.updateBlocks(dirty, func(key string) *v1.IPAMBlock {
		obj, _, _ := store.GetByKey(key)
		b, _ := obj.(*v1.IPAMBlock)
		return b
	}, s.nodeName, s.log)
	changed = changed&^(ChangedBlocks|ChangedPodIPs) | s.cache.nextBlocks(&snap, prev)
	if changed&ChangedNodes == 0 {
		snap.Nodes, snap.Local = prev.Nodes, prev.Local
	} else {
		nodes := s.nodes.GetStore()
		snap.Nodes = s.cache.nextNodes(prev.Nodes, dirtyNodes, func(name string) *corev1.Node {
			obj, _, _ := nodes.GetByKey(name)
			n, _ := obj.(*corev1.Node)
			return n
		}, s.log)
		snap.Local = localNode(snap.Nodes, s.nodeName)
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
	return snap, since
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
