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
// messages (OnUpdate: apis/model's, and felix's pods' addresses). Bursts of events coalesce into
// one pass: the agents always get each changed object's latest state, never a queue of stale
// ones.
type Syncer struct {
	nodeName string
	log      *slog.Logger
	onUpdate func(msgs []any)
	metrics  *Metrics

	nodes, pools, blocks, configs, felixConfigs, peers, filters, secrets cache.SharedIndexInformer
	// services and slices (EndpointSlices, indexed by their Service: byService).
	services, slices cache.SharedIndexInformer
	// handlers are the informers' event handlers, by resource.
	handlers map[string]cache.ResourceEventHandler
	changed  chan struct{}

	mu sync.Mutex
	// since: when the oldest event of dirty arrived (zero while none did), for the lag.
	since time.Time
	// dirty: the objects that changed since the last pass, by kind and informer key. A pass
	// looks at these, not at every object: a pod replaced on one node of a thousand costs each
	// agent one block, whatever the cluster's size, and a node joining costs one node.
	dirty dirtyKeys

	// Only the Run loop touches what follows.
	cache *viewCache
	// stream: what was sent on the change stream.
	stream *stream
	passed bool // the first pass is done
}

// dirtyKeys are the keys of the objects that changed, by kind.
type dirtyKeys struct {
	nodes, pools, blocks, configs, felixConfigs, peers, filters, secrets map[string]struct{}
	// services: by the Service's key, for its own events and for its EndpointSlices'
	// (sliceHandler).
	services map[string]struct{}
}

// empty: no object changed.
func (d *dirtyKeys) empty() bool {
	return len(d.nodes)+len(d.pools)+len(d.blocks)+len(d.configs)+len(d.felixConfigs)+len(d.peers)+len(d.filters)+len(d.secrets)+len(d.services) == 0
}

func newDirtyKeys() dirtyKeys {
	return dirtyKeys{nodes: map[string]struct{}{}, pools: map[string]struct{}{}, blocks: map[string]struct{}{},
		configs: map[string]struct{}{}, felixConfigs: map[string]struct{}{}, peers: map[string]struct{}{}, filters: map[string]struct{}{}, secrets: map[string]struct{}{},
		services: map[string]struct{}{}}
}

// take hands over the keys and leaves empty sets for the handlers; s.mu must be held. A set
// without keys stays: most passes make no new map.
func (d *dirtyKeys) take() dirtyKeys {
	out := *d
	for _, m := range []*map[string]struct{}{&d.nodes, &d.pools, &d.blocks, &d.configs, &d.felixConfigs, &d.peers, &d.filters, &d.secrets, &d.services} {
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
	// synced sends every object as an update (the BGPConfiguration and the FelixConfiguration
	// even when there is none: nil, the defaults) and ends with model.InSync; the next ones send
	// only what changed (model's updates.go, felix.PodIPsUpdate then felix.PodIPsDelta). A pass
	// in which nothing tabby reads changed sends nothing.
	OnUpdate func(msgs []any)
	Logger   *slog.Logger
	// Metrics, when set, count the watch events and time the passes.
	Metrics *Metrics
}

// New builds a syncer over c.
func New(c *client.Client, cfg Config) *Syncer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Syncer{nodeName: cfg.NodeName, log: cfg.Logger, onUpdate: cfg.OnUpdate, metrics: cfg.Metrics, changed: make(chan struct{}, 1),
		dirty: newDirtyKeys(), cache: newViewCache(), stream: newStream(), handlers: map[string]cache.ResourceEventHandler{}}
	// The caches keep only what a pass reads: managedFields are often the larger part of an
	// object, and a Node's images and conditions are of no use to tabby.
	s.nodes = client.Informer(c.Nodes(), trim.Object)
	if cfg.Namespace != "" {
		s.secrets = client.Informer(c.Secrets(cfg.Namespace), trim.Object)
	}
	s.pools = client.Informer(c.IPPools(), trim.Object)
	s.blocks = client.Informer(c.IPAMBlocks(), trim.Object)
	s.configs = client.Informer(c.BGPConfigurations(), trim.Object)
	s.felixConfigs = client.Informer(c.FelixConfigurations(), trim.Object)
	s.peers = client.Informer(c.BGPPeers(), trim.Object)
	s.filters = client.Informer(c.BGPFilters(), trim.Object)
	s.services = client.Informer(c.Services(""), trim.Object)
	s.slices = client.Informer(c.EndpointSlices(""), trim.Object)
	// AddIndexers fails only on a started informer.
	_ = s.slices.AddIndexers(cache.Indexers{byService: indexByService})
	for _, k := range []struct {
		inf      cache.SharedIndexInformer
		resource string
		dirty    func(*dirtyKeys) map[string]struct{}
	}{
		{s.nodes, "nodes", func(d *dirtyKeys) map[string]struct{} { return d.nodes }},
		{s.pools, "ippools", func(d *dirtyKeys) map[string]struct{} { return d.pools }},
		{s.blocks, "ipamblocks", func(d *dirtyKeys) map[string]struct{} { return d.blocks }},
		{s.configs, "bgpconfigurations", func(d *dirtyKeys) map[string]struct{} { return d.configs }},
		{s.felixConfigs, "felixconfigurations", func(d *dirtyKeys) map[string]struct{} { return d.felixConfigs }},
		{s.peers, "bgppeers", func(d *dirtyKeys) map[string]struct{} { return d.peers }},
		{s.filters, "bgpfilters", func(d *dirtyKeys) map[string]struct{} { return d.filters }},
		{s.secrets, "secrets", func(d *dirtyKeys) map[string]struct{} { return d.secrets }},
		{s.services, "services", func(d *dirtyKeys) map[string]struct{} { return d.services }},
	} {
		if k.inf == nil {
			continue
		}
		h := s.handler(k.resource, k.dirty)
		s.handlers[k.resource] = h
		_, _ = k.inf.AddEventHandler(h)
	}
	h := s.sliceHandler()
	s.handlers["endpointslices"] = h
	_, _ = s.slices.AddEventHandler(h)
	return s
}

// handler records an informer's events: the object's key as dirty.
func (s *Syncer) handler(resource string, dirty func(*dirtyKeys) map[string]struct{}) cache.ResourceEventHandlerFuncs {
	changed := func(obj any) {
		s.mu.Lock()
		if s.since.IsZero() {
			s.since = time.Now()
		}
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			dirty(&s.dirty)[key] = struct{}{}
		}
		s.mu.Unlock()
		s.metrics.event(resource) // after since: whoever sees the count sees the lag's start
		s.kick()
	}
	update := func(_, cur any) { changed(cur) }
	if resource == "nodes" {
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
	out := []cache.SharedIndexInformer{s.nodes, s.pools, s.blocks, s.configs, s.felixConfigs, s.peers, s.filters, s.services, s.slices}
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
			idle := s.passed && s.dirty.empty()
			s.mu.Unlock()
			if idle {
				continue // a kick whose change the previous pass already took
			}
			start := time.Now()
			msgs, since := s.pass()
			if s.onUpdate != nil && len(msgs) > 0 {
				s.onUpdate(msgs)
			}
			end := time.Now()
			pace.spent(end, end.Sub(start))
			s.metrics.observePass(since, start, end)
		}
	}
}

// pass brings the view cache up to date with what changed since the previous pass, and turns
// those changes into the messages of the change stream. Only the changed objects are read: every
// object in the first pass, after it the keys the informers' events marked dirty. It also says
// when the oldest event it holds arrived: zero for the first (its events waited for every cache
// to sync, not for a pass). Only the Run loop calls it.
func (s *Syncer) pass() ([]any, time.Time) {
	s.mu.Lock()
	since, dirty := s.since, s.dirty.take()
	s.since = time.Time{}
	s.mu.Unlock()
	first := !s.passed
	if first {
		// Every object, from the caches as they are now: the keys of the events before (the
		// caches' initial lists) are among them.
		since = time.Time{}
		dirty = dirtyKeys{nodes: keys(s.nodes), pools: keys(s.pools), blocks: keys(s.blocks), configs: keys(s.configs),
			felixConfigs: keys(s.felixConfigs), peers: keys(s.peers), filters: keys(s.filters), secrets: keys(s.secrets), services: keys(s.services)}
	}
	s.passed = true
	s.cache.updateBlocks(dirty.blocks, func(key string) *v1.IPAMBlock { return get[*v1.IPAMBlock](s.blocks, key) }, s.nodeName, s.log)
	s.cache.updateNodes(dirty.nodes, func(key string) *corev1.Node { return get[*corev1.Node](s.nodes, key) }, s.log)
	nodes, blocks := s.cache.takeChanges()
	var podIPs *PodIPsChange // the first pass sends every pod's addresses instead
	if !first {
		podIPs = diffPodIPs(blocks)
	}
	_, config := dirty.configs[v1.DefaultBGPConfigurationName]
	_, felixConfig := dirty.felixConfigs[v1.DefaultFelixConfigurationName]
	msgs := s.stream.messages(streamInputs{first: first, nodes: nodes, blocks: blocks,
		pools: dirty.pools, getPool: func(key string) *v1.IPPool { return get[*v1.IPPool](s.pools, key) },
		peers: dirty.peers, getPeer: func(key string) *v1.BGPPeer { return get[*v1.BGPPeer](s.peers, key) },
		filters: dirty.filters, getFilter: func(key string) *v1.BGPFilter { return get[*v1.BGPFilter](s.filters, key) },
		config: config, getConfig: s.bgpConfig,
		felixConfig: felixConfig, getFelixConfig: s.felixConfig,
		secrets: dirty.secrets, getSecret: func(key string) *corev1.Secret { return get[*corev1.Secret](s.secrets, key) },
		podIPs: s.cache.podIPs, podIPsChange: podIPs,
		services: dirty.services, getService: func(key string) *corev1.Service { return get[*corev1.Service](s.services, key) }, localEndpoint: s.localEndpoint,
	}, s.log)
	return msgs, since
}

// bgpConfig is the cluster's BGPConfiguration (the one named default), nil when there is none.
func (s *Syncer) bgpConfig() *v1.BGPConfiguration {
	return get[*v1.BGPConfiguration](s.configs, v1.DefaultBGPConfigurationName)
}

// felixConfig is the cluster's FelixConfiguration (the one named default), nil when there is none.
func (s *Syncer) felixConfig() *v1.FelixConfiguration {
	return get[*v1.FelixConfiguration](s.felixConfigs, v1.DefaultFelixConfigurationName)
}

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
