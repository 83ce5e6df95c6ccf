package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
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
	factories                                     []informers.SharedInformerFactory
	changed                                       chan struct{}

	mu      sync.Mutex
	pending Changes // what changed since the last snapshot
	cache   *viewCache
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
	s := &Syncer{nodeName: cfg.NodeName, log: cfg.Logger, onSnapshot: cfg.OnSnapshot, metrics: cfg.Metrics, changed: make(chan struct{}, 1), pending: ChangedAll, cache: newViewCache()}
	// The caches keep only what the snapshot reads: managedFields are often the larger part of an
	// object, and a Node's images and conditions are of no use to tabby.
	all := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithTransform(trim))
	s.nodes = all.Core().V1().Nodes().Informer()
	s.factories = append(s.factories, all)
	if cfg.Namespace != "" {
		ns := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(cfg.Namespace), informers.WithTransform(trim))
		s.secrets = ns.Core().V1().Secrets().Informer()
		s.factories = append(s.factories, ns)
	}
	s.pools = cache.NewSharedIndexInformer(c.IPPools().ListWatch(), &v1.IPPool{}, 0, cache.Indexers{})
	s.blocks = cache.NewSharedIndexInformer(c.IPAMBlocks().ListWatch(), &v1.IPAMBlock{}, 0, cache.Indexers{})
	s.configs = cache.NewSharedIndexInformer(c.BGPConfigurations().ListWatch(), &v1.BGPConfiguration{}, 0, cache.Indexers{})
	s.peers = cache.NewSharedIndexInformer(c.BGPPeers().ListWatch(), &v1.BGPPeer{}, 0, cache.Indexers{})
	for _, inf := range []cache.SharedIndexInformer{s.pools, s.blocks, s.configs, s.peers} {
		_ = inf.SetTransform(trim)
	}
	resources := []string{"nodes", "ippools", "ipamblocks", "bgpconfigurations", "bgppeers", "secrets"}
	kinds := []Changes{ChangedNodes, ChangedPools, ChangedBlocks, ChangedBGP, ChangedBGP, ChangedSecrets}
	for i, inf := range s.informers() {
		res, kind := resources[i], kinds[i]
		changed := func() {
			s.metrics.event(res)
			s.mu.Lock()
			s.pending |= kind
			s.mu.Unlock()
			s.kick()
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { changed() },
			UpdateFunc: func(any, any) { changed() },
			DeleteFunc: func(any) { changed() },
		})
	}
	return s
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
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
	for _, inf := range []cache.SharedIndexInformer{s.pools, s.blocks, s.configs, s.peers} {
		go inf.Run(ctx.Done())
	}
	var synced []cache.InformerSynced
	for _, inf := range s.informers() {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("datastore caches did not sync: %w", ctx.Err())
	}
	s.log.Info("datastore synced")
	s.kick()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
			start := time.Now()
			s.onSnapshot(s.Snapshot())
			s.metrics.observeSnapshot(time.Since(start).Seconds())
		}
	}
}

// Snapshot builds the current snapshot from the caches, with what changed since the previous
// one. Only the Run loop calls it (the view cache is its own).
func (s *Syncer) Snapshot() Snapshot {
	s.mu.Lock()
	changed := s.pending
	s.pending = 0
	s.mu.Unlock()
	in := Inputs{
		NodeName: s.nodeName,
		Nodes:    list[*corev1.Node](s.nodes),
		Pools:    list[*v1.IPPool](s.pools),
		Blocks:   list[*v1.IPAMBlock](s.blocks),
		BGPPeers: list[*v1.BGPPeer](s.peers),
	}
	if obj, ok, _ := s.configs.GetStore().GetByKey(v1.DefaultBGPConfigurationName); ok {
		in.BGPConfig = obj.(*v1.BGPConfiguration)
	}
	if s.secrets != nil {
		in.Secrets = list[*corev1.Secret](s.secrets)
	}
	snap := build(in, s.log, s.cache)
	snap.Changed = changed
	return snap
}

func list[T runtime.Object](inf cache.SharedIndexInformer) []T {
	items := inf.GetStore().List()
	out := make([]T, 0, len(items))
	for _, it := range items {
		out = append(out, it.(T))
	}
	return out
}

// trim drops the parts of cached objects nothing in tabby reads.
func trim(obj any) (any, error) {
	if m, ok := obj.(interface {
		SetManagedFields([]metav1.ManagedFieldsEntry)
	}); ok {
		m.SetManagedFields(nil)
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
		n.Status.Conditions = nil
	}
	return obj, nil
}
