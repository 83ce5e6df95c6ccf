package syncer

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/testenv"
)

func testBlock(i int, rv string, pods int) *v1.IPAMBlock {
	b := &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%d", i), ResourceVersion: rv},
		Spec: v1.IPAMBlockSpec{CIDR: fmt.Sprintf("10.244.%d.0/26", i), Affinity: fmt.Sprintf("host:n%d", i%3), Allocations: map[string]v1.Allocation{}}}
	for k := range pods {
		b.Spec.Allocations[strconv.Itoa(k)] = v1.Allocation{Handle: fmt.Sprintf("net.c%d-%d", i, k), Namespace: "ns", Pod: fmt.Sprintf("p%d-%d", i, k), Node: fmt.Sprintf("n%d", (i+k)%3)}
	}
	return b
}

// The syncer's passes, which read only what changed, give exactly what Build gives from every
// object, also after blocks and nodes changed (new resourceVersion) or went away: the snapshot
// and what its change stream sent.
func TestPassesMatchBuild(t *testing.T) {
	node := func(i int, rv, addr string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), ResourceVersion: rv,
			Annotations: map[string]string{v1.AnnotationBGPIPv4Address: addr}}}
	}
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: discard, OnSnapshot: func(Snapshot) {}, OnUpdate: func([]any) {}})
	for i := range 3 {
		s.put(t, node(i, "1", fmt.Sprintf("198.51.100.1%d/24", i)))
	}
	for i := range 6 {
		s.put(t, testBlock(i, "1", 5))
	}
	st := newStreamState()
	// ips is felix's map, fed what the syncer hands out: the whole map first, then the changes.
	var ips map[PodKey][]netip.Addr
	check := func(what string) {
		t.Helper()
		got, msgs, _ := s.pass()
		want := Build(s.inputs(), discard)
		if ips == nil {
			ips = got.PodIPs
		} else {
			policy.ApplyAddrs(ips, got.PodIPsChanged.Removed, got.PodIPsChanged.Added, func(PodKey) {})
		}
		if !reflect.DeepEqual(ips, want.PodIPs) {
			t.Fatalf("%s: the pods' addresses are %v, want %v", what, ips, want.PodIPs)
		}
		sameSnapshot(t, what, got, want)
		st.apply(t, msgs)
		st.check(t, s, what)
	}
	check("first")
	check("nothing changed")
	s.put(t, testBlock(2, "2", 9))
	s.put(t, node(1, "2", "198.51.100.21/24"))
	check("a block and a node changed")
	s.remove(t, "ipamblocks", "b4")
	s.remove(t, "ipamblocks", "b5")
	check("two blocks deleted")
	if len(s.cache.blocks) != 4 {
		t.Errorf("cache holds %d blocks after the deletion, want 4", len(s.cache.blocks))
	}
	s.put(t, testBlock(5, "3", 1))
	check("a block back with a new version")
	s.remove(t, "nodes", "n2")
	check("a node deleted")
	if _, ok := s.cache.nodes["n2"]; ok || len(s.cache.nodes) != 2 {
		t.Errorf("cache holds nodes %v after n2's deletion, want n0 and n1", slices.Collect(maps.Keys(s.cache.nodes)))
	}
}

// sameSnapshot fails the test when got, a pass's snapshot, says something else than want,
// Build's (apart from what tells them apart: Changed, and the pods' addresses as a change).
func sameSnapshot(t *testing.T, what string, got, want Snapshot) {
	t.Helper()
	same := slices.EqualFunc(got.Nodes, want.Nodes, model.Node.Equal) &&
		(got.Local == nil) == (want.Local == nil) && (got.Local == nil || got.Local.Equal(*want.Local)) &&
		slices.EqualFunc(got.Pools, want.Pools, model.Pool.Equal) &&
		slices.Equal(got.LocalBlocks, want.LocalBlocks) && slices.Equal(got.Borrowed, want.Borrowed) &&
		slices.Equal(got.Routable, want.Routable) && slices.Equal(got.Workloads, want.Workloads) &&
		reflect.DeepEqual(got.BGPConfig, want.BGPConfig) && len(got.BGPPeers) == len(want.BGPPeers) &&
		(len(got.BGPPeers) == 0 || reflect.DeepEqual(got.BGPPeers, want.BGPPeers)) &&
		maps.EqualFunc(got.Secrets, want.Secrets, func(a, b map[string][]byte) bool { return maps.EqualFunc(a, b, slices.Equal) })
	if !same {
		t.Fatalf("%s: the pass's snapshot differs from Build:\n got %+v\nwant %+v", what, got, want)
	}
}

// A block update elsewhere in the cluster changes the blocks only: the agents are not handed
// nodes, pools or BGP objects again. The change stream of the same passes sends the object that
// changed and nothing else.
func TestSyncerReportsWhatChanged(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "changes-n0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), "changes-n0", metav1.DeleteOptions{})
	})
	// A pass's change stream comes before its snapshot.
	type passSeen struct {
		Snapshot
		msgs []any
	}
	var mu sync.Mutex
	var snaps []passSeen
	var msgs []any
	got := make(chan struct{}, 100)
	m := NewMetrics(prometheus.NewRegistry())
	s := New(env.Client, Config{NodeName: "changes-n0", Metrics: m, OnUpdate: func(batch []any) { msgs = batch }, OnSnapshot: func(snap Snapshot) {
		mu.Lock()
		snaps = append(snaps, passSeen{snap, msgs})
		msgs = nil
		mu.Unlock()
		got <- struct{}{}
	}})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() { stop(); <-done }()
	wait := func(what string, cond func(Snapshot) bool) passSeen {
		t.Helper()
		for {
			mu.Lock()
			for i, sn := range snaps {
				if cond(sn.Snapshot) {
					snaps = snaps[i+1:] // the next wait looks at what came after
					mu.Unlock()
					return sn
				}
			}
			snaps = nil
			mu.Unlock()
			select {
			case <-got:
			case <-ctx.Done():
				t.Fatalf("no snapshot with %s", what)
			}
		}
	}
	first := wait("the first", func(sn Snapshot) bool { return sn.Local != nil })
	if first.Changed != ChangedAll && first.Changed&ChangedNodes == 0 {
		t.Fatalf("first snapshot changed %b", first.Changed)
	}
	if len(first.msgs) == 0 || first.msgs[len(first.msgs)-1] != any(model.InSync{}) ||
		!slices.ContainsFunc(first.msgs, func(m any) bool { u, ok := m.(model.NodeUpdate); return ok && u.Node.Name == "changes-n0" }) {
		t.Fatalf("the first pass sent %v, want this node and InSync at the end", first.msgs)
	}
	sent := func(sn passSeen, what string, want ...any) {
		t.Helper()
		if fmt.Sprintf("%v", sn.msgs) != fmt.Sprintf("%v", want) {
			t.Fatalf("%s: sent %v, want %v", what, sn.msgs, want)
		}
	}
	// The kubelet's status report: seen, and not a change of the nodes.
	n, err := env.Kube.CoreV1().Nodes().Get(ctx, "changes-n0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := testutil.ToFloat64(m.events.WithLabelValues("nodes"))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if _, err := env.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for testutil.ToFloat64(m.events.WithLabelValues("nodes")) == seen {
		if ctx.Err() != nil {
			t.Fatal("the node's status update never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A node joins, read alone: it is among the nodes, in name order, and only the nodes changed.
	joined := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "changes-n1", Annotations: map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.21/24"}}}
	if _, err := env.Kube.CoreV1().Nodes().Create(ctx, joined, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), "changes-n1", metav1.DeleteOptions{})
	})
	has := func(sn passSeen, name string) bool {
		return slices.ContainsFunc(sn.Nodes, func(n model.Node) bool { return n.Name == name })
	}
	sn := wait("the node that joined", func(sn Snapshot) bool { return has(passSeen{Snapshot: sn}, "changes-n1") })
	if sn.Changed != ChangedNodes || !slices.IsSortedFunc(sn.Nodes, func(a, b model.Node) int { return strings.Compare(a.Name, b.Name) }) ||
		sn.Local == nil || sn.Local.Name != "changes-n0" {
		t.Fatalf("a node joined: changed %b, nodes %+v, local %+v; want only the nodes, sorted, this one local", sn.Changed, sn.Nodes, sn.Local)
	}
	// This node's status report sent nothing; the node that joined, alone.
	joinedNode, _ := validation.ParseNode(joined)
	sent(sn, "a node joined", model.NodeUpdate{Node: joinedNode})
	if err := env.Kube.CoreV1().Nodes().Delete(ctx, "changes-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sn = wait("the node gone", func(sn Snapshot) bool { return !has(passSeen{Snapshot: sn}, "changes-n1") })
	if sn.Changed != ChangedNodes || !has(sn, "changes-n0") {
		t.Fatalf("a node left: changed %b, nodes %+v", sn.Changed, sn.Nodes)
	}
	sent(sn, "a node left", model.NodeRemove{Name: "changes-n1"})

	b := testBlock(200, "", 2)
	b.Name = "changes-10-244-200-0-26"
	b.Spec.CIDR = "10.244.200.0/26"
	if _, err := env.Client.IPAMBlocks().Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.IPAMBlocks().Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
	sn = wait("the new block", func(sn Snapshot) bool {
		for _, p := range sn.Routable {
			if p.String() == "10.244.200.0/26" {
				return true
			}
		}
		return false
	})
	if sn.Changed != ChangedBlocks|ChangedPodIPs {
		t.Fatalf("a node's status and a new block: changed %b, want only the blocks and the pods' addresses (%b)", sn.Changed, ChangedBlocks|ChangedPodIPs)
	}
	// The new block's pods, alone, as a change of the pods' addresses.
	if d := sn.PodIPsChanged; sn.PodIPs != nil || d == nil || len(d.Removed) != 0 || len(d.Added) != 2 ||
		!slices.ContainsFunc(d.Added, func(a PodAddr) bool { return a.Pod == PodKey{Namespace: "ns", Name: "p200-0"} }) {
		t.Fatalf("a block with 2 pods: PodIPs %d, PodIPsChanged %+v; want only the 2 pods' addresses as added", len(sn.PodIPs), sn.PodIPsChanged)
	}
	// Its pods are other nodes': the block, and the pods' addresses (n0's borrowed one is
	// routed to n0).
	block := model.Block{CIDR: netip.MustParsePrefix("10.244.200.0/26"), Node: "n2",
		Borrowed: []model.Borrowed{{Addr: netip.MustParseAddr("10.244.200.1"), Node: "n0"}}}
	sent(sn, "a new block", model.BlockUpdate{Block: block}, felix.PodIPsDelta{Added: sn.PodIPsChanged.Added})
	// What did not change is still there, carried over from the previous snapshot.
	if sn.Local == nil || sn.Local.Name != "changes-n0" || len(sn.Nodes) == 0 {
		t.Fatalf("a block update lost the nodes: local %+v, %d nodes", sn.Local, len(sn.Nodes))
	}

	// A pod replaced on the block's own node moves no route: the pods' addresses changed, and
	// nothing else is handed out again.
	routable := sn.Routable
	cur, err := env.Client.IPAMBlocks().Get(ctx, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	delete(cur.Spec.Allocations, "0")
	cur.Spec.Allocations["7"] = v1.Allocation{Handle: "net.c7", Namespace: "ns", Pod: "p200-7", Node: "n2"}
	if _, err := env.Client.IPAMBlocks().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	sn = wait("the replaced pod", func(sn Snapshot) bool {
		return sn.PodIPsChanged != nil && slices.ContainsFunc(sn.PodIPsChanged.Added, func(a PodAddr) bool { return a.Pod.Name == "p200-7" })
	})
	if sn.Changed != ChangedPodIPs {
		t.Fatalf("a pod replaced: changed %b, want only the pods' addresses (%b)", sn.Changed, ChangedPodIPs)
	}
	if d := sn.PodIPsChanged; len(d.Removed) != 1 || d.Removed[0].Pod.Name != "p200-0" || len(d.Added) != 1 {
		t.Fatalf("a pod replaced: PodIPsChanged %+v, want p200-0's address out and p200-7's in", d)
	}
	if len(sn.Routable) != len(routable) || &sn.Routable[0] != &routable[0] {
		t.Fatalf("a pod replaced: the routes were built again (%d, were %d)", len(sn.Routable), len(routable))
	}
	sent(sn, "a pod replaced", felix.PodIPsDelta{Removed: sn.PodIPsChanged.Removed, Added: sn.PodIPsChanged.Added})

	// The block deleted: its routes and its pods go.
	if err := env.Client.IPAMBlocks().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sn = wait("the deleted block", func(sn Snapshot) bool { return !slices.Contains(sn.Routable, netip.MustParsePrefix("10.244.200.0/26")) })
	if sn.Changed != ChangedBlocks|ChangedPodIPs || len(sn.PodIPsChanged.Removed) != 2 {
		t.Fatalf("a block deleted: changed %b, PodIPsChanged %+v; want the blocks and its 2 pods' addresses out", sn.Changed, sn.PodIPsChanged)
	}
	sent(sn, "a block deleted", model.BlockRemove{CIDR: block.CIDR}, felix.PodIPsDelta{Removed: sn.PodIPsChanged.Removed})
}

// The syncer after its first pass reads only the blocks that changed, and builds the blocks'
// part of a snapshot again only when one moved a route. Over random changes of every kind (a
// pod replaced, an address borrowed and returned, a block claimed, released, deleted, created, a
// pod of this node's, dual-stack pods whose two addresses change in different passes), what it
// hands out is what Build gives from every block, it says the routes changed exactly when
// Build's differ from the previous snapshot's, and its change stream, applied, is Build's view.
func TestIncrementalBlocksMatchBuild(t *testing.T) {
	const nodeName = "n0"
	s := newTestSyncer(t, Config{NodeName: nodeName, Logger: discard, OnSnapshot: func(Snapshot) {}, OnUpdate: func([]any) {}})
	for i := range 12 {
		s.put(t, testBlock(i, "1", 4))
	}
	for i := range 4 {
		s.put(t, testBlock6(i, "1", 4))
	}
	rng := rand.New(rand.NewPCG(1, 14))
	prev, msgs, _ := s.pass()
	st := newStreamState()
	st.apply(t, msgs)
	ips := prev.PodIPs
	rv := 1
	for step := range 1000 {
		for range 1 + rng.IntN(3) {
			rv++
			randomBlockChange(t, s, rng, rv)
		}
		snap, msgs, _ := s.pass()
		want := Build(s.inputs(), discard)
		policy.ApplyAddrs(ips, snap.PodIPsChanged.Removed, snap.PodIPsChanged.Added, func(PodKey) {})
		if !reflect.DeepEqual(ips, want.PodIPs) {
			t.Fatalf("step %d: the pods' addresses are %v, want %v", step, ips, want.PodIPs)
		}
		moved := !slices.Equal(want.LocalBlocks, prev.LocalBlocks) || !slices.Equal(want.Borrowed, prev.Borrowed) ||
			!slices.Equal(want.Routable, prev.Routable) || !slices.Equal(want.Workloads, prev.Workloads)
		if moved != (snap.Changed&ChangedBlocks != 0) {
			t.Fatalf("step %d: the blocks' routes moved: %v; the syncer says changed %b", step, moved, snap.Changed)
		}
		sameSnapshot(t, fmt.Sprintf("step %d", step), snap, want)
		st.apply(t, msgs)
		st.check(t, s, fmt.Sprintf("step %d", step))
		prev = snap
	}
}

// testBlock6 is the IPv6 block of testBlock(i)'s pods: its pods are dual-stack.
func testBlock6(i int, rv string, pods int) *v1.IPAMBlock {
	b := testBlock(i, rv, pods)
	b.Name, b.Spec.CIDR = fmt.Sprintf("b6-%d", i), fmt.Sprintf("fd00:10:244:%x::/122", i)
	return b
}

// randomBlockChange makes one random change to one block (or creates one), as version rv.
func randomBlockChange(t *testing.T, s *Syncer, rng *rand.Rand, rv int) {
	t.Helper()
	i := rng.IntN(16)
	mk, name := testBlock, fmt.Sprintf("b%d", i)
	if rng.IntN(4) == 0 { // an IPv6 block: the other address of dual-stack pods
		i %= 6
		mk, name = testBlock6, fmt.Sprintf("b6-%d", i)
	}
	old := get[*v1.IPAMBlock](s.blocks, name)
	if old == nil {
		s.put(t, mk(i, strconv.Itoa(rv), rng.IntN(4)))
		return
	}
	b := old.DeepCopy()
	b.ResourceVersion = strconv.Itoa(rv)
	ord := strconv.Itoa(rng.IntN(64))
	owner := strings.TrimPrefix(b.Spec.Affinity, v1.AffinityPrefixHost)
	switch rng.IntN(10) {
	case 0, 1, 2: // a pod replaced on the block's own node: the kind of change most are
		b.Spec.Allocations[ord] = v1.Allocation{Handle: fmt.Sprintf("net.r%d", rv), Namespace: "ns", Pod: fmt.Sprintf("r%d", rv), Node: owner}
		for k := range b.Spec.Allocations {
			if k != ord {
				delete(b.Spec.Allocations, k)
				break
			}
		}
	case 3: // an address borrowed by another node
		b.Spec.Allocations[ord] = v1.Allocation{Handle: fmt.Sprintf("net.r%d", rv), Namespace: "ns", Pod: fmt.Sprintf("r%d", rv), Node: fmt.Sprintf("n%d", rng.IntN(3))}
	case 4: // an address released
		for k := range b.Spec.Allocations {
			delete(b.Spec.Allocations, k)
			break
		}
	case 5: // the block claimed by another node, or released
		b.Spec.Affinity = []string{"", "host:n0", "host:n1", "host:n2"}[rng.IntN(4)]
	case 6:
		s.remove(t, "ipamblocks", name)
		return
	case 7: // a new version that changes nothing tabby reads
	case 8: // every address released (its node drained)
		clear(b.Spec.Allocations)
	case 9: // a pod of this node's, dual-stack: the same pod in the other family's block
		pod := fmt.Sprintf("d%d", rng.IntN(4))
		b.Spec.Allocations[ord] = v1.Allocation{Handle: "net.c" + pod, Namespace: "ns", Pod: pod, Node: "n0"}
	}
	s.put(t, b)
}

// After its first pass the syncer reads only the Nodes that changed. Over random changes (a
// node joins, leaves, is relabelled or readdressed, this node among them, a version that
// changes nothing tabby reads), its nodes and local node are what Build gives from every node.
func TestIncrementalNodesMatchBuild(t *testing.T) {
	const nodeName = "n0"
	s := newTestSyncer(t, Config{NodeName: nodeName, Logger: discard, OnSnapshot: func(Snapshot) {}, OnUpdate: func([]any) {}})
	rv := 1
	mk := func(i int) *corev1.Node {
		rv++
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), ResourceVersion: strconv.Itoa(rv),
			Labels:      map[string]string{"rack": fmt.Sprintf("r%d", i%3)},
			Annotations: map[string]string{v1.AnnotationBGPIPv4Address: fmt.Sprintf("198.51.100.%d/24", i+1)}}}
	}
	for i := range 8 {
		s.put(t, mk(i))
	}
	prev, msgs, _ := s.pass()
	st := newStreamState()
	st.apply(t, msgs)
	rng := rand.New(rand.NewPCG(2, 26))
	change := func() {
		i := rng.IntN(12)
		name := fmt.Sprintf("n%d", i)
		old := get[*corev1.Node](s.nodes, name)
		if old == nil {
			s.put(t, mk(i))
			return
		}
		n := old.DeepCopy()
		rv++
		n.ResourceVersion = strconv.Itoa(rv)
		switch rng.IntN(4) {
		case 0:
			s.remove(t, "nodes", name)
			return
		case 1:
			n.Labels = map[string]string{"rack": fmt.Sprintf("r%d", rng.IntN(3))}
		case 2:
			n.Annotations = map[string]string{v1.AnnotationBGPIPv4Address: fmt.Sprintf("203.0.113.%d/24", rng.IntN(250)+1)}
		case 3: // a new version that changes nothing tabby reads
		}
		s.put(t, n)
	}
	for step := range 1000 {
		n := rng.IntN(4) // none: a kick
		if n == 0 {
			s.Kick()
		}
		for range n {
			change()
		}
		before := slices.Clone(prev.Nodes)
		snap, msgs, _ := s.pass()
		want := Build(s.inputs(), discard)
		if !slices.EqualFunc(snap.Nodes, want.Nodes, model.Node.Equal) {
			t.Fatalf("step %d: nodes\n got %+v\nwant %+v", step, snap.Nodes, want.Nodes)
		}
		if (snap.Local == nil) != (want.Local == nil) || snap.Local != nil && !snap.Local.Equal(*want.Local) {
			t.Fatalf("step %d: local node %+v, want %+v", step, snap.Local, want.Local)
		}
		if !slices.EqualFunc(prev.Nodes, before, model.Node.Equal) {
			t.Fatalf("step %d: the previous snapshot's nodes were changed in place", step)
		}
		st.apply(t, msgs)
		st.check(t, s, fmt.Sprintf("step %d", step))
		prev = snap
	}
	if len(s.cache.nodes) != len(s.nodes.GetStore().ListKeys()) {
		t.Fatalf("the cache holds %d nodes, the datastore %d: deleted nodes are kept", len(s.cache.nodes), len(s.nodes.GetStore().ListKeys()))
	}
}
