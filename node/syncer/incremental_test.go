package syncer

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
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

// The syncer's passes, which read only what changed, send a stream that, applied, is what Build
// gives from every object, also after blocks and nodes changed (new resourceVersion) or went
// away; the view cache forgets what was deleted.
func TestPassesMatchBuild(t *testing.T) {
	node := func(i int, rv, addr string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), ResourceVersion: rv,
			Annotations: map[string]string{v1.AnnotationBGPIPv4Address: addr}}}
	}
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
	for i := range 3 {
		s.put(t, node(i, "1", fmt.Sprintf("198.51.100.1%d/24", i)))
	}
	for i := range 6 {
		s.put(t, testBlock(i, "1", 5))
	}
	st := newStreamState()
	check := func(what string) {
		t.Helper()
		msgs, _ := s.pass()
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

// Against a real API server, each pass sends the object that changed and nothing else: a node
// joining or leaving, alone; the kubelet's status report, nothing; a block elsewhere in the
// cluster, the block and its pods' addresses; a pod replaced on the block's own node, the pods'
// addresses alone (no route moved); the block deleted, its removal and its pods' addresses out;
// the FelixConfiguration written and deleted, it alone.
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
	passes := make(chan []any, 100)
	m := NewMetrics(prometheus.NewRegistry())
	s := New(env.Client, Config{NodeName: "changes-n0", Metrics: m, OnUpdate: func(msgs []any) { passes <- msgs }})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() { stop(); <-done }()
	// next is the next pass that sent something: nothing else changes the datastore, so every
	// one is the test's.
	next := func(what string) []any {
		t.Helper()
		select {
		case msgs := <-passes:
			return msgs
		case <-ctx.Done():
			t.Fatalf("no pass sent %s", what)
			return nil
		}
	}
	sent := func(msgs []any, what string, want ...any) {
		t.Helper()
		if fmt.Sprintf("%v", msgs) != fmt.Sprintf("%v", want) {
			t.Fatalf("%s: sent %v, want %v", what, msgs, want)
		}
	}
	first := next("the first pass")
	if len(first) == 0 || first[len(first)-1] != any(model.InSync{}) ||
		!slices.ContainsFunc(first, func(m any) bool { u, ok := m.(model.NodeUpdate); return ok && u.Node.Name == "changes-n0" }) {
		t.Fatalf("the first pass sent %v, want this node and InSync at the end", first)
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
	// A node joins: the next pass sends it alone (this node's status report sent nothing).
	joined := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "changes-n1", Annotations: map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.21/24"}}}
	if _, err := env.Kube.CoreV1().Nodes().Create(ctx, joined, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), "changes-n1", metav1.DeleteOptions{})
	})
	joinedNode, _ := validation.ParseNode(joined)
	sent(next("the node that joined"), "a node joined", model.NodeUpdate{Node: joinedNode})
	if err := env.Kube.CoreV1().Nodes().Delete(ctx, "changes-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sent(next("the node gone"), "a node left", model.NodeRemove{Name: "changes-n1"})

	// A block elsewhere: the block (n0's borrowed address in it routed to n0), and its two pods'
	// addresses as added.
	b := testBlock(200, "", 2)
	b.Name = "changes-10-244-200-0-26"
	b.Spec.CIDR = "10.244.200.0/26"
	if _, err := env.Client.IPAMBlocks().Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.IPAMBlocks().Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
	block := model.Block{CIDR: netip.MustParsePrefix("10.244.200.0/26"), Node: "n2",
		Borrowed: []model.Borrowed{{Addr: netip.MustParseAddr("10.244.200.1"), Node: "n0"}}}
	msgs := next("the new block")
	sent(msgs, "a new block", model.BlockUpdate{Block: block}, addrsDelta(msgs))
	podAddrs(t, "a new block", msgs[len(msgs)-1], nil, []string{"p200-0", "p200-1"})

	// A pod replaced on the block's own node moves no route: the pods' addresses alone.
	cur, err := env.Client.IPAMBlocks().Get(ctx, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	delete(cur.Spec.Allocations, "0")
	cur.Spec.Allocations["7"] = v1.Allocation{Handle: "net.c7", Namespace: "ns", Pod: "p200-7", Node: "n2"}
	if _, err := env.Client.IPAMBlocks().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	msgs = next("the replaced pod")
	sent(msgs, "a pod replaced", addrsDelta(msgs))
	podAddrs(t, "a pod replaced", msgs[0], []string{"p200-0"}, []string{"p200-7"})

	// The block deleted: its removal, and its pods' addresses out.
	if err := env.Client.IPAMBlocks().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs = next("the deleted block")
	sent(msgs, "a block deleted", model.BlockRemove{CIDR: block.CIDR}, addrsDelta(msgs))
	podAddrs(t, "a block deleted", msgs[len(msgs)-1], []string{"p200-1", "p200-7"}, nil)

	// The FelixConfiguration written, then deleted: it alone, then nil (the defaults).
	vni := 4097
	fc := &v1.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultFelixConfigurationName}, Spec: v1.FelixConfigurationSpec{VXLANVNI: &vni}}
	if _, err := env.Client.FelixConfigurations().Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.FelixConfigurations().Delete(context.Background(), fc.Name, metav1.DeleteOptions{})
	})
	msgs = next("the FelixConfiguration")
	if u, ok := msgs[0].(model.FelixConfigurationUpdate); len(msgs) != 1 || !ok || u.Config == nil || *u.Config.Spec.VXLANVNI != vni {
		t.Fatalf("a FelixConfiguration written: sent %v", msgs)
	}
	if err := env.Client.FelixConfigurations().Delete(ctx, fc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sent(next("the FelixConfiguration deleted"), "the FelixConfiguration deleted", model.FelixConfigurationUpdate{})
}

// addrsDelta is the PodIPsDelta among msgs, for a comparison of the messages' kinds and order
// (podAddrs checks its content, in no order); an empty one when there is none.
func addrsDelta(msgs []any) felix.PodIPsDelta {
	for _, m := range msgs {
		if d, ok := m.(felix.PodIPsDelta); ok {
			return d
		}
	}
	return felix.PodIPsDelta{}
}

// podAddrs fails the test unless msg is a PodIPsDelta whose addresses out and in are those of
// the pods named, in any order.
func podAddrs(t *testing.T, what string, msg any, removed, added []string) {
	t.Helper()
	d, ok := msg.(felix.PodIPsDelta)
	names := func(addrs []PodAddr) []string {
		var out []string
		for _, a := range addrs {
			out = append(out, a.Pod.Name)
		}
		slices.Sort(out)
		return out
	}
	if !ok || !slices.Equal(names(d.Removed), removed) || !slices.Equal(names(d.Added), added) {
		t.Fatalf("%s: the pods' addresses %#v, want %v out and %v in", what, msg, removed, added)
	}
}

// The syncer after its first pass reads only the blocks that changed. Over random changes of
// every kind (a pod replaced, an address borrowed and returned, a block claimed, released,
// deleted, created, a pod of this node's, dual-stack pods whose two addresses change in
// different passes), its change stream, applied, is what Build gives from every block after
// every step; none of its messages changes nothing (a pod replaced sends no block, no
// workload), and none is modified once sent.
func TestIncrementalBlocksMatchBuild(t *testing.T) {
	const nodeName = "n0"
	s := newTestSyncer(t, Config{NodeName: nodeName, Logger: discard, OnUpdate: func([]any) {}})
	for i := range 12 {
		s.put(t, testBlock(i, "1", 4))
	}
	for i := range 4 {
		s.put(t, testBlock6(i, "1", 4))
	}
	rng := rand.New(rand.NewPCG(1, 14))
	msgs, _ := s.pass()
	st := newStreamState()
	st.apply(t, msgs)
	st.check(t, s, "first pass")
	rv := 1
	randomPasses(t, s, st, 1000, func() int {
		n := 1 + rng.IntN(3)
		for range n {
			rv++
			randomBlockChange(t, s, rng, rv)
		}
		return n
	})
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
// changes nothing tabby reads), its change stream, applied, holds the nodes Build gives from
// every node; a pass with nothing changed sends nothing, and nothing sent is modified later.
func TestIncrementalNodesMatchBuild(t *testing.T) {
	const nodeName = "n0"
	s := newTestSyncer(t, Config{NodeName: nodeName, Logger: discard, OnUpdate: func([]any) {}})
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
	msgs, _ := s.pass()
	st := newStreamState()
	st.apply(t, msgs)
	st.check(t, s, "first pass")
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
	randomPasses(t, s, st, 1000, func() int {
		n := rng.IntN(4) // none: a pass with nothing changed
		for range n {
			change()
		}
		return n
	})
	if len(s.cache.nodes) != len(s.nodes.GetStore().ListKeys()) {
		t.Fatalf("the cache holds %d nodes, the datastore %d: deleted nodes are kept", len(s.cache.nodes), len(s.nodes.GetStore().ListKeys()))
	}
}
