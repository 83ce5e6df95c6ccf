package gc_test

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/gc"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// deletedNodeWorld: nodes a (sorts first), b (to be deleted), c. b holds two blocks: one with a
// gone pod, a pod still bound to b, b's IPIP and IPv4 VXLAN tunnel addresses and an address c
// borrowed; one empty. b also borrowed an address in c's block (its pod gone), left a handle
// without allocation, and holds an IPv6 block with its IPv6 VXLAN tunnel address alone.
type deletedNodeWorld struct {
	s                                      *ipamtest.Store
	alloc                                  *ipam.Allocator
	now                                    time.Time
	bBlock, bEmpty, bBlock6                netip.Prefix
	gone, stillBound, tunnel, cBorrow, bIn ipam.Assignment
	vtep, vtep6                            ipam.Assignment
}

func newDeletedNodeWorld(t *testing.T) *deletedNodeWorld {
	t.Helper()
	ctx := context.Background()
	w := &deletedNodeWorld{s: ipamtest.NewStore(), now: time.Unix(1000, 0)}
	s := w.s
	// "a-no-tabby" sorts first but runs no tabby-node: it must not be the one to collect.
	s.AddNode("a-no-tabby", nil)
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		s.AddTabbyNode(n, nil)
	}
	s.AddPool("p", "10.244.0.0/24", 28)
	s.AddPool("p6", "fd00:10:244::/120", 124)
	w.alloc = ipam.New(s, ipam.Config{Now: func() time.Time { return w.now }})
	assign := func(r ipam.Request) ipam.Assignment {
		t.Helper()
		as, err := w.alloc.Assign(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return as
	}
	for _, p := range []string{"gone", "bound", "b-borrowed"} {
		s.AddPod(ipam.Pod{Namespace: "default", Name: p, NodeName: "node-b"})
	}
	s.AddPod(ipam.Pod{Namespace: "default", Name: "c-pod", NodeName: "node-c"})
	s.AddPod(ipam.Pod{Namespace: "default", Name: "c-other", NodeName: "node-c"})
	w.gone = assign(ipam.Request{Handle: "net.gone", Node: "node-b", Namespace: "default", Pod: "gone"})
	w.stillBound = assign(ipam.Request{Handle: "net.bound", Node: "node-b", Namespace: "default", Pod: "bound"})
	w.tunnel = assign(ipam.Request{Handle: names.TunnelHandle("node-b"), Node: "node-b"})
	w.vtep = assign(ipam.Request{Handle: names.VXLANTunnelHandle("node-b", ipfamily.IPv4), Node: "node-b"})
	w.vtep6 = assign(ipam.Request{Family: ipfamily.IPv6, Handle: names.VXLANTunnelHandle("node-b", ipfamily.IPv6), Node: "node-b"})
	w.bBlock6 = w.vtep6.Block
	w.bBlock = w.gone.Block
	cOwn := assign(ipam.Request{Handle: "net.c-other", Node: "node-c", Namespace: "default", Pod: "c-other"})

	// c borrows from b's block, b borrows from c's: written the way the allocator does.
	put := func(block netip.Prefix, ip netip.Addr, handle, node, pod string) ipam.Assignment {
		t.Helper()
		b, err := s.GetBlock(ctx, names.BlockName(block))
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ipam.OrdinalOf(block, ip)
		b.Spec.Allocations[strconv.Itoa(o)] = v1.Allocation{Handle: handle, Namespace: "default", Pod: pod, Node: node}
		if _, err := s.UpdateBlock(ctx, b); err != nil {
			t.Fatal(err)
		}
		h := &v1.IPAMHandle{ObjectMeta: metav1.ObjectMeta{Name: names.HandleName(handle), Annotations: map[string]string{ipam.AnnotationHandleNode: node}},
			Spec: v1.IPAMHandleSpec{HandleID: handle, Block: map[string]int{block.String(): 1}}}
		if _, err := s.CreateHandle(ctx, h); err != nil {
			t.Fatal(err)
		}
		return ipam.Assignment{IP: ip, Block: block}
	}
	w.cBorrow = put(w.bBlock, ipam.AddrAt(w.bBlock, 9), "net.c-pod", "node-c", "c-pod")
	w.bIn = put(cOwn.Block, ipam.AddrAt(cOwn.Block, 9), "net.b-borrowed", "node-b", "b-borrowed")

	// An empty block of b, and a handle of b without allocation.
	w.bEmpty = netip.MustParsePrefix("10.244.0.240/28")
	if _, err := s.CreateBlock(ctx, &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(w.bEmpty)},
		Spec: v1.IPAMBlockSpec{CIDR: w.bEmpty.String(), Affinity: "host:node-b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateAffinity(ctx, &v1.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: names.AffinityName("node-b", w.bEmpty)},
		Spec: v1.BlockAffinitySpec{Node: "node-b", CIDR: w.bEmpty.String(), State: v1.AffinityConfirmed}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateHandle(ctx, &v1.IPAMHandle{ObjectMeta: metav1.ObjectMeta{Name: "net.b-orphan", Annotations: map[string]string{ipam.AnnotationHandleNode: "node-b"}},
		Spec: v1.IPAMHandleSpec{HandleID: "net.b-orphan", Block: map[string]int{w.bBlock.String(): 1}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := ipam.Check(ctx, s); err != nil || r.Problems() != 1 || len(r.HandlesWithoutAllocation) != 1 {
		t.Fatalf("the world before the deletion: %+v %v", r, err)
	}
	return w
}

func (w *deletedNodeWorld) collector(node string) *gc.Collector {
	return gc.New(w.s, w.alloc, gc.Config{Node: node, GracePeriod: time.Minute, Now: func() time.Time { return w.now }})
}

func (w *deletedNodeWorld) held(t *testing.T, ip netip.Addr) bool {
	t.Helper()
	_, err := ipam.WhoHas(context.Background(), w.s, ip)
	return err == nil
}

func TestDeletedNodeReleased(t *testing.T) {
	ctx := context.Background()
	w := newDeletedNodeWorld(t)
	s := w.s
	leader, other := w.collector("node-a"), w.collector("node-c")
	s.DeleteNode("node-b")
	// Kubernetes' pod GC deleted b's pods, except "bound" (not yet).
	s.DeletePod("default", "gone")
	s.DeletePod("default", "b-borrowed")

	for _, c := range []*gc.Collector{leader, other} {
		if res, err := c.RunOnce(ctx); err != nil || len(res.ReleasedIPs)+len(res.ReleasedBlocks)+len(res.UnaffinedBlocks)+len(res.DeletedHandles) != 0 {
			t.Fatalf("first look must only note: %+v %v", res, err)
		}
	}
	w.now = w.now.Add(59 * time.Second)
	if res, _ := leader.RunOnce(ctx); len(res.ReleasedIPs)+len(res.ReleasedBlocks) != 0 {
		t.Fatalf("acted within the grace period: %+v", res)
	}
	w.now = w.now.Add(2 * time.Second)
	// node-c is not the first live node: it leaves node-b alone.
	if res, err := other.RunOnce(ctx); err != nil || len(res.ReleasedIPs)+len(res.ReleasedBlocks)+len(res.UnaffinedBlocks) != 0 {
		t.Fatalf("a second node acted: %+v %v", res, err)
	}
	res, err := leader.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range []netip.Addr{w.gone.IP, w.tunnel.IP, w.vtep.IP, w.vtep6.IP, w.bIn.IP} {
		if !slices.Contains(res.ReleasedIPs, ip) || w.held(t, ip) {
			t.Errorf("%s of deleted node-b not released: %+v", ip, res)
		}
	}
	for _, ip := range []netip.Addr{w.stillBound.IP, w.cBorrow.IP} {
		if !w.held(t, ip) {
			t.Errorf("live pod's %s released", ip)
		}
	}
	slices.SortFunc(res.ReleasedBlocks, netip.Prefix.Compare)
	if !slices.Equal(res.ReleasedBlocks, []netip.Prefix{w.bEmpty, w.bBlock6}) || !slices.Equal(res.UnaffinedBlocks, []netip.Prefix{w.bBlock}) {
		t.Errorf("blocks: released %v unaffined %v", res.ReleasedBlocks, res.UnaffinedBlocks)
	}
	b, err := s.GetBlock(ctx, names.BlockName(w.bBlock))
	if err != nil || b.Spec.Affinity != "" || len(b.Spec.Allocations) != 2 {
		t.Fatalf("b's block with live pods must stay, unaffine, with 2 allocations: %+v %v", b, err)
	}
	if a := s.Affinities(); len(a) != 1 || a[0].Spec.Node != "node-c" { // node-a never claimed one
		t.Errorf("affinities left: %+v", a)
	}
	for _, h := range s.Handles() {
		if _, n, ok := ipam.TunnelOf(h.Spec.HandleID); ok && n == "node-b" || h.Name == "net.b-orphan" || h.Name == "net.gone" {
			t.Errorf("handle %s of node-b left", h.Name)
		}
	}
	if r, _ := ipam.Check(ctx, s); r.Problems() != 0 {
		t.Errorf("check after the release: %+v", r)
	}

	// The last pods go: the bound pod (kube's pod GC) and c's borrower (DEL never came: c's own
	// collector). The unaffine block is then deleted once it stayed empty for the grace period.
	s.DeletePod("default", "bound")
	s.DeletePod("default", "c-pod")
	for range 6 {
		for _, c := range []*gc.Collector{leader, other} {
			if _, err := c.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		w.now = w.now.Add(40 * time.Second)
	}
	if w.held(t, w.stillBound.IP) || w.held(t, w.cBorrow.IP) {
		t.Fatal("addresses of deleted pods left")
	}
	if _, err := s.GetBlock(ctx, names.BlockName(w.bBlock)); err == nil {
		t.Fatal("empty block without affinity left")
	}
	for _, b := range s.Blocks() {
		if b.Spec.Affinity != "host:node-a" && b.Spec.Affinity != "host:node-c" {
			t.Errorf("block %s (%q) left", b.Spec.CIDR, b.Spec.Affinity)
		}
	}
	if r, _ := ipam.Check(ctx, s); r.Problems() != 0 {
		t.Errorf("check at the end: %+v", r)
	}
}

// A Node re-created under the same name before the second look keeps everything.
func TestDeletedNodeSecondLook(t *testing.T) {
	ctx := context.Background()
	w := newDeletedNodeWorld(t)
	s := w.s
	c := w.collector("node-a")
	s.DeleteNode("node-b")
	s.DeletePod("default", "gone")
	s.DeletePod("default", "b-borrowed")
	if _, err := c.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	w.now = w.now.Add(2 * time.Minute)
	// The node rejoins between the list and the second look.
	s.Inject(func(op ipamtest.Op, name string) error {
		if op == "GetNode" && name == "node-b" {
			s.AddTabbyNode("node-b", nil)
		}
		return nil
	})
	res, err := c.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ReleasedBlocks)+len(res.UnaffinedBlocks) != 0 || !w.held(t, w.tunnel.IP) {
		t.Fatalf("acted on a node that came back: %+v", res)
	}
	if b, _ := s.GetBlock(ctx, names.BlockName(w.bEmpty)); b == nil || b.Spec.Affinity != "host:node-b" {
		t.Fatal("the rejoined node lost its block")
	}
}

// A borrower's allocation landing in the deleted node's empty block between the read and the
// delete wins: the block is made unaffine instead, never deleted with the allocation in it.
func TestDeletedNodeBlockRace(t *testing.T) {
	ctx := context.Background()
	w := newDeletedNodeWorld(t)
	s := w.s
	c := w.collector("node-a")
	s.DeleteNode("node-b")
	if _, err := c.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	w.now = w.now.Add(2 * time.Minute)
	raced := false
	s.Inject(func(op ipamtest.Op, name string) error {
		if op == "DeleteBlock" && name == names.BlockName(w.bEmpty) && !raced {
			raced = true
			b, _ := s.GetBlock(ctx, name)
			b.Spec.Allocations = map[string]v1.Allocation{"3": {Handle: "net.late", Namespace: "default", Pod: "c-pod", Node: "node-c"}}
			if _, err := s.UpdateBlock(ctx, b); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	if _, err := c.RunOnce(ctx); err == nil {
		t.Fatal("a lost compare-and-swap must be reported for the next round")
	}
	s.Inject(nil)
	b, err := s.GetBlock(ctx, names.BlockName(w.bEmpty))
	if err != nil || len(b.Spec.Allocations) != 1 {
		t.Fatalf("the borrower's allocation was lost: %+v %v", b, err)
	}
	if _, err := c.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ = s.GetBlock(ctx, names.BlockName(w.bEmpty))
	if b == nil || b.Spec.Affinity != "" || len(b.Spec.Allocations) != 1 {
		t.Fatalf("next round: want unaffine with the allocation, got %+v", b)
	}
}

// A node whose tabby-node recorded only an IPv6 BGP address (an IPv6-only node) runs tabby: the
// first of them collects a deleted node's IPAM.
func TestIPv6OnlyNodeLeads(t *testing.T) {
	ctx := context.Background()
	w := newDeletedNodeWorld(t)
	s := w.s
	for _, kv := range [][2]string{{v1.AnnotationBGPIPv4Address, ""}, {v1.AnnotationBGPIPv6Address, "2001:db8:100::1/64"}} {
		if err := s.SetNodeAnnotation(ctx, "node-a", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	c := w.collector("node-a")
	s.DeleteNode("node-b")
	s.DeletePod("default", "gone")
	if _, err := c.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	w.now = w.now.Add(61 * time.Second)
	res, err := c.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.ReleasedIPs, w.gone.IP) || w.held(t, w.gone.IP) {
		t.Fatalf("the IPv6-only node that sorts first did not release %v of deleted node-b: %+v", w.gone.IP, res)
	}
}

// A NotReady node (its kubelet stopped reporting; perhaps down) does not lead: the next ready
// tabby node collects the deleted node's IPAM, and the NotReady one leaves it alone.
func TestNotReadyNodeDoesNotLead(t *testing.T) {
	ctx := context.Background()
	w := newDeletedNodeWorld(t)
	s := w.s
	s.SetNodeNotReady("node-a", true)
	first, next := w.collector("node-a"), w.collector("node-c")
	s.DeleteNode("node-b")
	s.DeletePod("default", "gone")
	for _, c := range []*gc.Collector{first, next} {
		if _, err := c.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.now = w.now.Add(61 * time.Second)
	if res, err := first.RunOnce(ctx); err != nil || len(res.ReleasedIPs)+len(res.ReleasedBlocks)+len(res.UnaffinedBlocks) != 0 {
		t.Fatalf("the NotReady node acted: %+v %v", res, err)
	}
	res, err := next.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.ReleasedIPs, w.gone.IP) || w.held(t, w.gone.IP) {
		t.Fatalf("the first ready node did not release %v of deleted node-b: %+v", w.gone.IP, res)
	}
}
