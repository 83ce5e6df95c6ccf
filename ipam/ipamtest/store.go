// Package ipamtest is an in-memory ipam.Store for unit tests: resourceVersion compare-and-swap
// like the API server, failure and conflict injection, and a count of calls per operation.
package ipamtest

import (
	"context"
	"maps"
	"net/netip"
	"sort"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/ipam"
)

// Op names an operation for Inject and Calls: "ListPools", "GetBlock", "UpdateBlock", ...
type Op string

// Store is the fake. The zero value is not usable: call NewStore.
type Store struct {
	mu      sync.Mutex
	rv      int
	pools   map[string]*v1.IPPool
	blocks  map[string]*v1.IPAMBlock
	affs    map[string]*v1.BlockAffinity
	handles map[string]*v1.IPAMHandle
	nodes   map[string]*corev1.Node
	pods    map[string]*ipam.Pod
	nsAnn   map[string]map[string]string
	calls   map[Op]int
	inject  func(op Op, name string) error
	// staleBlocks, when set, is what ListBlocks answers: an API server's watch cache that has
	// not caught up (KubeStore.ListsFromCache).
	staleBlocks []v1.IPAMBlock
}

var _ ipam.Store = (*Store)(nil)

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{
		pools: map[string]*v1.IPPool{}, blocks: map[string]*v1.IPAMBlock{}, affs: map[string]*v1.BlockAffinity{},
		handles: map[string]*v1.IPAMHandle{}, nodes: map[string]*corev1.Node{}, pods: map[string]*ipam.Pod{},
		nsAnn: map[string]map[string]string{}, calls: map[Op]int{},
	}
}

// Inject sets a hook called before every operation (with the store unlocked); a non-nil error is
// returned instead of doing the operation. nil removes the hook.
func (s *Store) Inject(f func(op Op, name string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inject = f
}

// ConflictOnce returns a hook that fails the first n calls of op with a Conflict.
func ConflictOnce(op Op, n int) func(Op, string) error {
	var mu sync.Mutex
	return func(o Op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if o == op && n > 0 {
			n--
			return apierrors.NewConflict(schema.GroupResource{Group: v1.GroupName, Resource: string(op)}, name, nil)
		}
		return nil
	}
}

// Calls returns how many times op ran (including injected failures).
func (s *Store) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// TotalCalls is the number of calls of every operation: what the API server would have served.
func (s *Store) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

// CallCounts copies the counters, by operation.
func (s *Store) CallCounts() map[Op]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// ResetCalls zeroes the counters.
func (s *Store) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = map[Op]int{}
}

func (s *Store) enter(op Op, name string) error {
	s.mu.Lock()
	s.calls[op]++
	f := s.inject
	s.mu.Unlock()
	if f != nil {
		if err := f(op, name); err != nil {
			return err
		}
	}
	s.mu.Lock()
	return nil
}

func (s *Store) next() string { s.rv++; return strconv.Itoa(s.rv) }

func gr(res string) schema.GroupResource {
	return schema.GroupResource{Group: v1.GroupName, Resource: res}
}

// AddPool adds or replaces a pool.
func (s *Store) AddPool(name, cidr string, blockSize int, mutate ...func(*v1.IPPool)) {
	p := &v1.IPPool{Spec: v1.IPPoolSpec{CIDR: cidr, BlockSize: blockSize}}
	p.Name = name
	for _, m := range mutate {
		m(p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.ResourceVersion = s.next()
	s.pools[name] = p
}

// DeletePool removes a pool.
func (s *Store) DeletePool(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pools, name)
}

// AddNode adds or replaces a node.
func (s *Store) AddNode(name string, labels map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{}}}
}

// AddTabbyNode adds a node on which tabby-node runs: it has recorded its BGP address.
func (s *Store) AddTabbyNode(name string, labels map[string]string) {
	s.AddNode(name, labels)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[name].Annotations[v1.AnnotationBGPIPv4Address] = "198.51.100.1/24"
}

// SetNodeNotReady marks a node's Ready condition as not True.
func (s *Store) SetNodeNotReady(name string, notReady bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	status := corev1.ConditionTrue
	if notReady {
		status = corev1.ConditionFalse
	}
	s.nodes[name].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
}

// DeleteNode removes a node.
func (s *Store) DeleteNode(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, name)
}

// AddPod adds or replaces a pod.
func (s *Store) AddPod(p ipam.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[p.Namespace+"/"+p.Name] = &p
}

// DeletePod removes a pod.
func (s *Store) DeletePod(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, namespace+"/"+name)
}

// SetNamespaceAnnotations creates or replaces a namespace.
func (s *Store) SetNamespaceAnnotations(ns string, ann map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nsAnn[ns] = ann
}

func (s *Store) ListPools(ctx context.Context) ([]v1.IPPool, error) {
	if err := s.enter("ListPools", ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []v1.IPPool
	for _, p := range s.pools {
		out = append(out, *p.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// The three CAS-ed kinds share their logic.
type object[T any] interface {
	*T
	GetName() string
	GetResourceVersion() string
	SetResourceVersion(string)
}

func get[T any, P object[T]](s *Store, m map[string]P, res, name string, cp func(P) P) (P, error) {
	o, ok := m[name]
	if !ok {
		return nil, apierrors.NewNotFound(gr(res), name)
	}
	return cp(o), nil
}

func create[T any, P object[T]](s *Store, m map[string]P, res string, o P, cp func(P) P) (P, error) {
	if _, ok := m[o.GetName()]; ok {
		return nil, apierrors.NewAlreadyExists(gr(res), o.GetName())
	}
	if o.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	c := cp(o)
	c.SetResourceVersion(s.next())
	m[o.GetName()] = c
	return cp(c), nil
}

func update[T any, P object[T]](s *Store, m map[string]P, res string, o P, cp func(P) P) (P, error) {
	cur, ok := m[o.GetName()]
	if !ok {
		return nil, apierrors.NewNotFound(gr(res), o.GetName())
	}
	if cur.GetResourceVersion() != o.GetResourceVersion() {
		return nil, apierrors.NewConflict(gr(res), o.GetName(), nil)
	}
	c := cp(o)
	c.SetResourceVersion(s.next())
	m[o.GetName()] = c
	return cp(c), nil
}

func del[T any, P object[T]](s *Store, m map[string]P, res, name, rv string) error {
	cur, ok := m[name]
	if !ok {
		return apierrors.NewNotFound(gr(res), name)
	}
	if rv != "" && cur.GetResourceVersion() != rv {
		return apierrors.NewConflict(gr(res), name, nil)
	}
	delete(m, name)
	return nil
}

func cpBlock(b *v1.IPAMBlock) *v1.IPAMBlock       { return b.DeepCopy() }
func cpAff(b *v1.BlockAffinity) *v1.BlockAffinity { return b.DeepCopy() }
func cpHandle(b *v1.IPAMHandle) *v1.IPAMHandle    { return b.DeepCopy() }

func (s *Store) GetBlock(ctx context.Context, name string) (*v1.IPAMBlock, error) {
	if err := s.enter("GetBlock", name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return get(s, s.blocks, v1.ResourceIPAMBlocks, name, cpBlock)
}

func (s *Store) ListBlocks(ctx context.Context) ([]v1.IPAMBlock, error) {
	if err := s.enter("ListBlocks", ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.staleBlocks != nil {
		out := make([]v1.IPAMBlock, len(s.staleBlocks))
		for i := range s.staleBlocks {
			out[i] = *s.staleBlocks[i].DeepCopy()
		}
		return out, nil
	}
	return s.listBlocks(), nil
}

func (s *Store) listBlocks() []v1.IPAMBlock {
	out := []v1.IPAMBlock{}
	for _, b := range s.blocks {
		out = append(out, *b.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// FreezeBlockLists has ListBlocks answer the blocks as they are now, whatever is written later,
// until the returned function is called: the lag of a list served from the API server's watch
// cache. Gets and writes see the current blocks.
func (s *Store) FreezeBlockLists() (thaw func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staleBlocks = s.listBlocks()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.staleBlocks = nil
	}
}

func (s *Store) CreateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error) {
	if err := s.enter("CreateBlock", b.Name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return create(s, s.blocks, v1.ResourceIPAMBlocks, b, cpBlock)
}

func (s *Store) UpdateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error) {
	if err := s.enter("UpdateBlock", b.Name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return update(s, s.blocks, v1.ResourceIPAMBlocks, b, cpBlock)
}

func (s *Store) DeleteBlock(ctx context.Context, name, rv string) error {
	if err := s.enter("DeleteBlock", name); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return del(s, s.blocks, v1.ResourceIPAMBlocks, name, rv)
}

func (s *Store) ListAffinities(ctx context.Context) ([]v1.BlockAffinity, error) {
	if err := s.enter("ListAffinities", ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []v1.BlockAffinity
	for _, b := range s.affs {
		out = append(out, *b.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Store) CreateAffinity(ctx context.Context, a *v1.BlockAffinity) (*v1.BlockAffinity, error) {
	if err := s.enter("CreateAffinity", a.Name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return create(s, s.affs, v1.ResourceBlockAffinities, a, cpAff)
}

func (s *Store) DeleteAffinity(ctx context.Context, name, rv string) error {
	if err := s.enter("DeleteAffinity", name); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return del(s, s.affs, v1.ResourceBlockAffinities, name, rv)
}

func (s *Store) GetHandle(ctx context.Context, name string) (*v1.IPAMHandle, error) {
	if err := s.enter("GetHandle", name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return get(s, s.handles, v1.ResourceIPAMHandles, name, cpHandle)
}

func (s *Store) ListHandles(ctx context.Context) ([]v1.IPAMHandle, error) {
	if err := s.enter("ListHandles", ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []v1.IPAMHandle
	for _, b := range s.handles {
		out = append(out, *b.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Store) CreateHandle(ctx context.Context, h *v1.IPAMHandle) (*v1.IPAMHandle, error) {
	if err := s.enter("CreateHandle", h.Name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return create(s, s.handles, v1.ResourceIPAMHandles, h, cpHandle)
}

func (s *Store) UpdateHandle(ctx context.Context, h *v1.IPAMHandle) (*v1.IPAMHandle, error) {
	if err := s.enter("UpdateHandle", h.Name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return update(s, s.handles, v1.ResourceIPAMHandles, h, cpHandle)
}

func (s *Store) DeleteHandle(ctx context.Context, name, rv string) error {
	if err := s.enter("DeleteHandle", name); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return del(s, s.handles, v1.ResourceIPAMHandles, name, rv)
}

// parseNode is the node as the KubeStore reads it, on a copy the caller may modify.
func parseNode(n *corev1.Node) *model.Node {
	out, _ := validation.ParseNode(n.DeepCopy())
	return &out
}

func (s *Store) GetNode(ctx context.Context, name string) (*model.Node, error) {
	if err := s.enter("GetNode", name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	n, ok := s.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return parseNode(n), nil
}

func (s *Store) ListNodes(ctx context.Context) ([]model.Node, error) {
	if err := s.enter("ListNodes", ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []model.Node
	for _, n := range s.nodes {
		out = append(out, *parseNode(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Store) SetNodeAnnotation(ctx context.Context, node, key, value string) error {
	if err := s.enter("SetNodeAnnotation", node); err != nil {
		return err
	}
	defer s.mu.Unlock()
	n, ok := s.nodes[node]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, node)
	}
	if value == "" {
		delete(n.Annotations, key)
	} else {
		n.Annotations[key] = value
	}
	return nil
}

func copyPod(p *ipam.Pod) *ipam.Pod {
	c := *p
	c.Annotations = map[string]string{}
	for k, v := range p.Annotations {
		c.Annotations[k] = v
	}
	c.IPs = append([]netip.Addr(nil), p.IPs...)
	return &c
}

func (s *Store) GetPod(ctx context.Context, namespace, name string) (*ipam.Pod, error) {
	if err := s.enter("GetPod", namespace+"/"+name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	p, ok := s.pods[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	return copyPod(p), nil
}

func (s *Store) ListPods(ctx context.Context, node string) ([]ipam.Pod, error) {
	if err := s.enter("ListPods", ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []ipam.Pod
	for _, p := range s.pods {
		if node != "" && p.NodeName != node {
			continue
		}
		out = append(out, *copyPod(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}

func (s *Store) GetNamespaceAnnotations(ctx context.Context, name string) (map[string]string, error) {
	if err := s.enter("GetNamespaceAnnotations", name); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ann, ok := s.nsAnn[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	c := map[string]string{}
	for k, v := range ann {
		c[k] = v
	}
	return c, nil
}

// Blocks returns a copy of every block (for assertions).
func (s *Store) Blocks() []v1.IPAMBlock {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listBlocks()
}

// Handles returns a copy of every handle (for assertions).
func (s *Store) Handles() []v1.IPAMHandle {
	h, _ := s.ListHandles(context.Background())
	return h
}

// Affinities returns a copy of every affinity (for assertions).
func (s *Store) Affinities() []v1.BlockAffinity {
	a, _ := s.ListAffinities(context.Background())
	return a
}
