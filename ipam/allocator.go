package ipam

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Config tunes an Allocator.
type Config struct {
	// StrictAffinity forbids borrowing addresses from other nodes' blocks.
	StrictAffinity bool
	// MaxRetries bounds the compare-and-swap retries of one operation (default 20).
	MaxRetries int
	// AffinityGracePeriod is how long a node's block must stay empty before ReleaseEmptyBlocks
	// gives it back to the pool (default 5 minutes).
	AffinityGracePeriod time.Duration
	// CacheTTL is how long pools, node labels and namespace annotations are reused before being
	// read again (default 2 s; negative: read every time). Past it, and up to 10 TTLs, the last
	// copy is still served while one background read refreshes it. Blocks are not subject to it:
	// they are cached until a compare-and-swap finds them stale.
	CacheTTL time.Duration
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// PodAnnotations, when set, answers from a cache (tabby-node's informer of its node's pods)
	// what the pool choice would otherwise GET from the API server; found=false falls back to the
	// GET. Only the pool choice uses it: the garbage collector always looks at fresh data.
	PodAnnotations func(namespace, name string) (annotations map[string]string, found bool)
	// Pools, when set, answers the IPPools from a cache that a watch keeps current
	// (tabby-node's informer); ok=false (not synced yet) falls back to the API server. With it
	// the allocator never lists pools on a pod's behalf.
	Pools func() (pools []v1.IPPool, ok bool)
	// Blocks, when set, answers the IPAMBlocks from such a cache; ok=false falls back to the
	// API server. A cached list may lag, which costs at most a retry: the node's own blocks it
	// disagrees on are read again (mergeBlocks), a block is claimed by a create, and an address
	// is written with a compare-and-swap on a deep copy. Without it a node's first claim lists
	// and decodes every block of the cluster for one pod's ADD.
	Blocks func() (blocks []v1.IPAMBlock, ok bool)
}

// DefaultMaxRetries etc. are the defaults New fills in.
const (
	DefaultMaxRetries          = 20
	DefaultAffinityGracePeriod = 5 * time.Minute
	DefaultCacheTTL            = 2 * time.Second
)

// Request asks for one address of one family for an attachment.
type Request struct {
	// Family of the address; IPv4 when unset (the IPAM socket's requests, which predate IPv6).
	Family ipfamily.Family
	// Handle is <network>.<containerID>: the key of idempotent assign and of release.
	Handle string
	// Node is the node the workload runs on.
	Node string
	// Namespace and Pod name the workload (empty for a tunnel address).
	Namespace, Pod string
	// Pools restricts the choice to these pools (names or CIDRs), e.g. from the CNI config;
	// empty: the pod's or its namespace's tabby.dev/ipv4pools annotation, else every enabled pool
	// whose nodeSelector matches the node.
	Pools []string
}

func (r Request) family() ipfamily.Family {
	if r.Family == ipfamily.Unknown {
		return ipfamily.IPv4
	}
	return r.Family
}

// Assignment is an address held by a handle.
type Assignment struct {
	IP    netip.Addr
	Block netip.Prefix
	Pool  string
	// Overhead is what the pool's encapsulation adds to packets between nodes (EncapOverhead):
	// the pod's MTU leaves room for it.
	Overhead int
	// Borrowed: the block is affine to another node; this node advertises the /32.
	Borrowed bool
	// Node that allocated the address (Lookup fills it in).
	Node string
}

// Allocator hands out addresses from blocks. It is safe for concurrent use; one Allocator per
// process serves every node it is asked about, and keeps each node's affine blocks in memory.
type Allocator struct {
	store Store
	cfg   Config
	log   *slog.Logger

	mu         sync.Mutex
	nodes      map[string]*nodeState
	blockLocks map[netip.Prefix]*sync.Mutex
	poolCache  cached[poolSet]
	labelCache map[string]cached[map[string]string]
	nsCache    map[string]cached[map[string]string]
	refreshing map[string]bool // background cache reads in flight (revalidate)
}

type cached[T any] struct {
	val T
	at  time.Time
	ok  bool
}

type poolSet struct {
	pools []model.Pool
	bad   []string
}

// nodeState is what the allocator remembers of one node. mu serialises the writes to the node's
// blocks: concurrent Assigns on one node would otherwise all pick the same free ordinal and all
// but one lose the compare-and-swap. Concurrent Assigns are not serialised one by one, though:
// they queue, and one committer writes all queued allocations of a block in one update.
type nodeState struct {
	name   string
	mu     sync.Mutex
	loaded atomic.Bool                    // read without mu on the fast path
	blocks map[netip.Prefix]*v1.IPAMBlock // affine blocks, last copy seen
	cursor map[netip.Prefix]int           // next ordinal to try, per block
	// emptySince is when ReleaseEmptyBlocks first saw a block empty.
	emptySince map[netip.Prefix]time.Time

	// The group commit of Assigns (commit.go): queue holds the requests waiting for the
	// committer; committing says a committer goroutine runs. Guarded by qmu, not mu (the
	// committer holds mu across its datastore writes).
	qmu        sync.Mutex
	queue      []*assignOp
	committing bool
}

// New returns an allocator over store.
func New(store Store, cfg Config) *Allocator {
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.AffinityGracePeriod == 0 {
		cfg.AffinityGracePeriod = DefaultAffinityGracePeriod
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Allocator{
		store: store, cfg: cfg, log: log.With("component", "ipam"),
		nodes:      map[string]*nodeState{},
		blockLocks: map[netip.Prefix]*sync.Mutex{},
		labelCache: map[string]cached[map[string]string]{},
		nsCache:    map[string]cached[map[string]string]{},
		refreshing: map[string]bool{},
	}
}

// Store is the datastore the allocator works on.
func (a *Allocator) Store() Store { return a.store }

func (a *Allocator) fresh(at time.Time) bool {
	return a.cfg.CacheTTL > 0 && a.cfg.Now().Sub(at) < a.cfg.CacheTTL
}

// pools lists and parses the IPPools, from the cache when it is fresh and force is false.
func (a *Allocator) pools(ctx context.Context, force bool) ([]model.Pool, []string, error) {
	if a.cfg.Pools != nil && !force {
		if items, ok := a.cfg.Pools(); ok {
			pools, bad := parsePools(items)
			return pools, bad, nil
		}
	}
	a.mu.Lock()
	c := a.poolCache
	a.mu.Unlock()
	if !force && c.ok && (a.fresh(c.at) || a.revalidate("pools", c.at, func(ctx context.Context) error { _, _, err := a.readPools(ctx); return err })) {
		return c.val.pools, c.val.bad, nil
	}
	return a.readPools(ctx)
}

// listBlocks lists the IPAMBlocks from Config.Blocks once it has synced, else from the store.
func (a *Allocator) listBlocks(ctx context.Context) ([]v1.IPAMBlock, error) {
	if a.cfg.Blocks != nil {
		if items, ok := a.cfg.Blocks(); ok {
			return items, nil
		}
	}
	return a.store.ListBlocks(ctx)
}

func (a *Allocator) readPools(ctx context.Context) ([]model.Pool, []string, error) {
	items, err := a.store.ListPools(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list IPPools: %w", err)
	}
	pools, bad := parsePools(items)
	a.mu.Lock()
	a.poolCache = cached[poolSet]{val: poolSet{pools, bad}, at: a.cfg.Now(), ok: true}
	a.mu.Unlock()
	return pools, bad, nil
}

// staleFactor bounds how old (in CacheTTLs) a cached value may be and still be served while a
// background read refreshes it.
const staleFactor = 10

// revalidate reports whether a cached value read at "at", past its TTL, may still be served; if
// so it starts (at most one per key) a background read that refreshes it. Serving the last copy
// keeps the ListPools/GetNode/GET namespace round trips off the Assign path (and stops every
// Assign of a burst from reading them at once when the TTL runs out); the price is that a
// change is seen one background read later.
func (a *Allocator) revalidate(key string, at time.Time, read func(context.Context) error) bool {
	if a.cfg.CacheTTL <= 0 || a.cfg.Now().Sub(at) >= staleFactor*a.cfg.CacheTTL {
		return false
	}
	a.mu.Lock()
	if a.refreshing[key] {
		a.mu.Unlock()
		return true
	}
	a.refreshing[key] = true
	a.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := read(ctx); err != nil {
			a.log.Debug("background cache refresh failed", "key", key, "err", err)
		}
		a.mu.Lock()
		delete(a.refreshing, key)
		a.mu.Unlock()
	}()
	return true
}

func (a *Allocator) nodeLabels(ctx context.Context, node string) (map[string]string, error) {
	a.mu.Lock()
	c := a.labelCache[node]
	a.mu.Unlock()
	if c.ok && (a.fresh(c.at) || a.revalidate("node/"+node, c.at, func(ctx context.Context) error { _, err := a.readNodeLabels(ctx, node); return err })) {
		return c.val, nil
	}
	return a.readNodeLabels(ctx, node)
}

func (a *Allocator) readNodeLabels(ctx context.Context, node string) (map[string]string, error) {
	n, err := a.store.GetNode(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", node, err)
	}
	a.mu.Lock()
	a.labelCache[node] = cached[map[string]string]{val: n.Labels, at: a.cfg.Now(), ok: true}
	a.mu.Unlock()
	return n.Labels, nil
}

func (a *Allocator) namespaceAnnotations(ctx context.Context, ns string) (map[string]string, error) {
	a.mu.Lock()
	c := a.nsCache[ns]
	a.mu.Unlock()
	if c.ok && (a.fresh(c.at) || a.revalidate("namespace/"+ns, c.at, func(ctx context.Context) error { _, err := a.readNamespaceAnnotations(ctx, ns); return err })) {
		return c.val, nil
	}
	return a.readNamespaceAnnotations(ctx, ns)
}

func (a *Allocator) readNamespaceAnnotations(ctx context.Context, ns string) (map[string]string, error) {
	ann, err := a.store.GetNamespaceAnnotations(ctx, ns)
	if apierrors.IsNotFound(err) {
		ann, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", ns, err)
	}
	a.mu.Lock()
	a.nsCache[ns] = cached[map[string]string]{val: ann, at: a.cfg.Now(), ok: true}
	a.mu.Unlock()
	return ann, nil
}

func (a *Allocator) node(name string) *nodeState {
	a.mu.Lock()
	defer a.mu.Unlock()
	ns := a.nodes[name]
	if ns == nil {
		ns = &nodeState{name: name, blocks: map[netip.Prefix]*v1.IPAMBlock{}, cursor: map[netip.Prefix]int{}, emptySince: map[netip.Prefix]time.Time{}}
		a.nodes[name] = ns
	}
	return ns
}

// blockLock serialises this process's releases in one block.
func (a *Allocator) blockLock(c netip.Prefix) *sync.Mutex {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.blockLocks[c]
	if l == nil {
		l = &sync.Mutex{}
		a.blockLocks[c] = l
	}
	return l
}

// backoff waits a little, more after each lost compare-and-swap, with jitter so that processes
// that collided do not collide again in lockstep.
func backoff(ctx context.Context, attempt int) {
	if attempt == 0 {
		return
	}
	// Up to 32 ms: CNI processes of the direct path releasing in one block under load (each
	// round a GET and an update) need the room to stop colliding within the attempts allowed.
	d := time.Duration(rand.Int64N(int64(min(attempt, 16)) * int64(2*time.Millisecond)))
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// knownNode is the node state for name if this allocator has one.
func (a *Allocator) knownNode(name string) *nodeState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodes[name]
}

// Assign gives r.Handle an address, or returns the one it already holds.
func (a *Allocator) Assign(ctx context.Context, r Request) (Assignment, error) {
	if r.Handle == "" {
		return Assignment{}, &kindError{ErrInvalidRequest, "assign: request has no handle"}
	}
	if r.Node == "" {
		return Assignment{}, &kindError{ErrInvalidRequest, fmt.Sprintf("assign %s: request names no node", r.Handle)}
	}
	ns := a.node(r.Node)
	if err := a.ensureLoaded(ctx, ns); err != nil {
		return Assignment{}, fmt.Errorf("assign %s: %w", r.Handle, err)
	}

	// In one of the node's own blocks the block update is the only write: no IPAMHandle
	// (handles.go).
	pools, err := a.choosePools(ctx, r)
	if err != nil {
		return Assignment{}, fmt.Errorf("assign %s: %w", r.Handle, err)
	}
	as, err := a.commitAssign(ctx, ns, &assignOp{ctx: ctx, r: r, pools: pools})
	if err != nil {
		// Leave nothing behind: an allocation (also one whose update's outcome was unknown, if
		// it went through after all) and its handle go.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := a.ReleaseHandle(cctx, r.Handle); rerr != nil {
			return Assignment{}, fmt.Errorf("assign %s: %w (and cleaning up failed: %v)", r.Handle, err, rerr)
		}
		return Assignment{}, fmt.Errorf("assign %s: %w", r.Handle, err)
	}
	return as, nil
}

// choice is a free address found by pick.
type choice struct {
	block    netip.Prefix
	obj      *v1.IPAMBlock
	ordinal  int
	pool     model.Pool
	borrowed bool
}

// pick finds a free address: in the node's affine blocks, else in a block it claims, else (unless
// StrictAffinity) in another node's block.
func (a *Allocator) pick(ctx context.Context, ns *nodeState, pools []model.Pool) (choice, error) {
	if c, ok := ns.pickAffine(pools); ok {
		return c, nil
	}
	blocks, err := a.listBlocks(ctx)
	if err != nil {
		return choice{}, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	if err := a.mergeBlocks(ctx, ns, blocks); err != nil {
		return choice{}, err
	}
	if c, ok := ns.pickAffine(pools); ok {
		return c, nil
	}
	for _, p := range pools {
		c, ok, err := a.claim(ctx, ns, p, blocks)
		if err != nil {
			return choice{}, err
		}
		if ok {
			return c, nil
		}
	}
	if !a.cfg.StrictAffinity {
		if c, ok := borrow(ns.name, pools, blocks); ok {
			return c, nil
		}
	}
	return choice{}, exhausted(pools, a.cfg.StrictAffinity)
}

func exhausted(pools []model.Pool, strict bool) error {
	var cidrs []string
	for _, p := range pools {
		cidrs = append(cidrs, p.CIDR.String())
	}
	s := cidrs[0]
	if len(cidrs) > 1 {
		s = fmt.Sprint(cidrs)
	}
	if strict {
		return fmt.Errorf("pool %s %w: no free block, and StrictAffinity forbids borrowing", s, ErrPoolExhausted)
	}
	return fmt.Errorf("pool %s %w: no free block and no free address to borrow", s, ErrPoolExhausted)
}

func (ns *nodeState) pickAffine(pools []model.Pool) (choice, bool) {
	return ns.pickAffineIn(pools, nil)
}

// pickAffineIn is pickAffine seeing the blocks a batch is about to write (pending) instead of
// their cached copies, so two requests of one batch never get the same ordinal.
func (ns *nodeState) pickAffineIn(pools []model.Pool, pending map[netip.Prefix]*blockWrite) (choice, bool) {
	cidrs := make([]netip.Prefix, 0, len(ns.blocks))
	for c := range ns.blocks {
		cidrs = append(cidrs, c)
	}
	sort.Slice(cidrs, func(i, j int) bool { return cidrs[i].Addr().Less(cidrs[j].Addr()) })
	for _, p := range pools {
		for _, c := range cidrs {
			if !p.CIDR.Contains(c.Addr()) {
				continue
			}
			b, from := ns.blocks[c], ns.cursor[c]
			if w := pending[c]; w != nil {
				b, from = w.obj, w.next
			}
			if o, ok := freeOrdinal(c, b, from); ok {
				return choice{block: c, obj: ns.blocks[c], ordinal: o, pool: p}, true
			}
		}
	}
	return choice{}, false
}

// claim creates a free block of p for the node, the lowest one. Creating the IPAMBlock is the
// claim: of two nodes racing for one block exactly one Create succeeds, the other moves on to the
// next free block.
func (a *Allocator) claim(ctx context.Context, ns *nodeState, p model.Pool, blocks []v1.IPAMBlock) (choice, bool, error) {
	var used []netip.Prefix
	for i := range blocks {
		if c, err := parseBlockCIDR(&blocks[i]); err == nil && p.CIDR.Overlaps(c) {
			used = append(used, c)
		}
	}
	free := newFreeBlocks(p.CIDR, p.BlockSize, used)
	for {
		c, ok := free.next()
		if !ok {
			return choice{}, false, nil
		}
		b := &v1.IPAMBlock{
			ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(c)},
			Spec:       v1.IPAMBlockSpec{CIDR: c.String(), Affinity: v1.AffinityPrefixHost + ns.name},
		}
		got, err := a.store.CreateBlock(ctx, b)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return choice{}, false, fmt.Errorf("claim block %s of pool %s: %w", c, p.Name, err)
		}
		if err := a.ensureAffinity(ctx, ns.name, c); err != nil {
			return choice{}, false, err
		}
		a.log.Info("claimed block", "node", ns.name, "block", c, "pool", p.Name)
		ns.blocks[c] = got
		return choice{block: c, obj: got, ordinal: 0, pool: p}, true, nil
	}
}

func (a *Allocator) ensureAffinity(ctx context.Context, node string, c netip.Prefix) error {
	aff := &v1.BlockAffinity{
		ObjectMeta: metav1.ObjectMeta{Name: names.AffinityName(node, c)},
		Spec:       v1.BlockAffinitySpec{Node: node, CIDR: c.String(), State: v1.AffinityConfirmed},
	}
	if _, err := a.store.CreateAffinity(ctx, aff); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create BlockAffinity %s: %w", aff.Name, err)
	}
	return nil
}

// borrow finds a free address in another node's block of one of the pools, taking from the
// block with the most free addresses so borrowers spread out instead of colliding.
func borrow(node string, pools []model.Pool, blocks []v1.IPAMBlock) (choice, bool) {
	best, bestFree := choice{}, 0
	for _, p := range pools {
		for i := range blocks {
			b := &blocks[i]
			c, err := parseBlockCIDR(b)
			if err != nil || affinityNode(b) == node || !p.CIDR.Contains(c.Addr()) || c.Bits() < p.CIDR.Bits() {
				continue
			}
			free := freeCount(c, b)
			if free <= bestFree {
				continue
			}
			if o, ok := freeOrdinal(c, b, 0); ok {
				best, bestFree = choice{block: c, obj: b, ordinal: o, pool: p, borrowed: true}, free
			}
		}
		if bestFree > 0 {
			return best, true
		}
	}
	return choice{}, false
}

// refreshBlock reads a block again (after a lost compare-and-swap, or a list that disagrees
// with the cache). A block that is gone or no longer the node's leaves the cache; on any other
// error the cached copy stays, since the cache is where DEL finds the node's addresses.
func (a *Allocator) refreshBlock(ctx context.Context, ns *nodeState, c netip.Prefix, name string) error {
	b, err := a.store.GetBlock(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		delete(ns.blocks, c)
	case err != nil:
		return fmt.Errorf("get IPAMBlock %s: %w", name, err)
	case affinityNode(b) != ns.name:
		delete(ns.blocks, c)
	default:
		ns.blocks[c] = b
	}
	return nil
}

// ensureLoaded fills the node's block cache once, and repairs what a crash between two writes of
// a claim or a block release left behind (doc.go).
func (a *Allocator) ensureLoaded(ctx context.Context, ns *nodeState) error {
	if ns.loaded.Load() {
		return nil
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.loaded.Load() {
		return nil
	}
	blocks, err := a.listBlocks(ctx)
	if err != nil {
		return fmt.Errorf("list IPAMBlocks: %w", err)
	}
	affs, err := a.store.ListAffinities(ctx)
	if err != nil {
		return fmt.Errorf("list BlockAffinities: %w", err)
	}
	// Every listed block of the node is read again (usually one): a process that just started
	// may be a DEL right after its pod's ADD, and a list from a lagging cache would not hold the
	// address.
	if err := a.mergeBlocks(ctx, ns, blocks); err != nil {
		return err
	}
	have := map[string]bool{}
	for _, af := range affs {
		if af.Spec.Node != ns.name {
			continue
		}
		have[af.Name] = true
		c, err := parseAffinityCIDR(&af)
		if err != nil {
			continue
		}
		if _, ok := ns.blocks[c]; !ok {
			// The block was released (or claimed by another node) but the affinity stayed. The
			// list may be stale (KubeStore.ListsFromCache): ask for the block itself first.
			if b, err := a.store.GetBlock(ctx, names.BlockName(c)); err == nil && affinityNode(b) == ns.name {
				ns.blocks[c] = b
				continue
			} else if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("get IPAMBlock %s: %w", names.BlockName(c), err)
			}
			if err := a.store.DeleteAffinity(ctx, af.Name, af.ResourceVersion); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("delete stale BlockAffinity %s: %w", af.Name, err)
			}
			a.log.Info("deleted stale block affinity", "node", ns.name, "block", c)
		}
	}
	for c := range ns.blocks {
		if !have[names.AffinityName(ns.name, c)] {
			if err := a.ensureAffinity(ctx, ns.name, c); err != nil {
				return err
			}
			a.log.Info("restored missing block affinity", "node", ns.name, "block", c)
		}
	}
	ns.loaded.Store(true)
	return nil
}
