package syncer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/hack/testenv"
)

func testBlock(i int, rv string, pods int) *v1.IPAMBlock {
	b := &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%d", i), ResourceVersion: rv},
		Spec: v1.IPAMBlockSpec{CIDR: fmt.Sprintf("10.244.%d.0/26", i), Affinity: fmt.Sprintf("host:n%d", i%3), Allocations: map[string]v1.Allocation{}}}
	for k := range pods {
		b.Spec.Allocations[strconv.Itoa(k)] = v1.Allocation{Handle: fmt.Sprintf("net.c%d-%d", i, k), Namespace: "ns", Pod: fmt.Sprintf("p%d-%d", i, k), Node: fmt.Sprintf("n%d", (i+k)%3)}
	}
	return b
}

// The syncer's cached build gives exactly what Build gives, also after blocks and nodes changed
// (new resourceVersion) or went away.
func TestCachedBuildMatchesBuild(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	node := func(i int, rv, addr string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), ResourceVersion: rv,
			Annotations: map[string]string{v1.AnnotationBGPIPv4Address: addr}}}
	}
	in := Inputs{NodeName: "n0",
		Nodes: []*corev1.Node{node(0, "1", "198.51.100.10/24"), node(1, "1", "198.51.100.11/24"), node(2, "1", "198.51.100.12/24")}}
	for i := range 6 {
		in.Blocks = append(in.Blocks, testBlock(i, "1", 5))
	}
	c := newViewCache()
	// ips is felix's map, fed what the syncer hands out: the whole map first, then the changes.
	var ips map[PodKey][]netip.Addr
	check := func(what string) {
		t.Helper()
		got, want := build(in, quiet, c), Build(in, quiet)
		// The cached build leaves the pods' addresses to the changes it records, block by block.
		changes, _ := c.takeChanges()
		if ips == nil {
			ips = c.podIPs()
		} else {
			d := diffPodIPs(changes)
			policy.ApplyAddrs(ips, d.Removed, d.Added, func(PodKey) {})
		}
		if !reflect.DeepEqual(ips, want.PodIPs) {
			t.Fatalf("%s: the pods' addresses are %v, want %v", what, ips, want.PodIPs)
		}
		got.PodIPs, want.PodIPs = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: cached build differs:\n got %+v\nwant %+v", what, got, want)
		}
	}
	check("first")
	check("nothing changed")
	in.Blocks[2] = testBlock(2, "2", 9)
	in.Nodes[1] = node(1, "2", "198.51.100.21/24")
	check("a block and a node changed")
	in.Blocks = in.Blocks[:4]
	check("two blocks deleted")
	if len(c.blocks) != 4 {
		t.Errorf("cache holds %d blocks after the deletion, want 4", len(c.blocks))
	}
	in.Blocks = append(in.Blocks, testBlock(5, "3", 1))
	check("a block back with a new version")
	in.Nodes = in.Nodes[:2]
	check("a node deleted")
	if _, ok := c.nodes["n2"]; ok || len(c.nodes) != 2 {
		t.Errorf("cache holds nodes %v after n2's deletion, want n0 and n1", slices.Collect(maps.Keys(c.nodes)))
	}
}

// A block update elsewhere in the cluster changes the blocks only: the agents are not handed
// nodes, pools or BGP objects again.
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
	var mu sync.Mutex
	var snaps []Snapshot
	got := make(chan struct{}, 100)
	m := NewMetrics(prometheus.NewRegistry())
	s := New(env.Client, Config{NodeName: "changes-n0", Metrics: m, OnSnapshot: func(snap Snapshot) {
		mu.Lock()
		snaps = append(snaps, snap)
		mu.Unlock()
		got <- struct{}{}
	}})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() { stop(); <-done }()
	wait := func(what string, cond func(Snapshot) bool) Snapshot {
		t.Helper()
		for {
			mu.Lock()
			for i, sn := range snaps {
				if cond(sn) {
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
	has := func(sn Snapshot, name string) bool {
		return slices.ContainsFunc(sn.Nodes, func(n model.Node) bool { return n.Name == name })
	}
	sn := wait("the node that joined", func(sn Snapshot) bool { return has(sn, "changes-n1") })
	if sn.Changed != ChangedNodes || !slices.IsSortedFunc(sn.Nodes, func(a, b model.Node) int { return strings.Compare(a.Name, b.Name) }) ||
		sn.Local == nil || sn.Local.Name != "changes-n0" {
		t.Fatalf("a node joined: changed %b, nodes %+v, local %+v; want only the nodes, sorted, this one local", sn.Changed, sn.Nodes, sn.Local)
	}
	if err := env.Kube.CoreV1().Nodes().Delete(ctx, "changes-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sn = wait("the node gone", func(sn Snapshot) bool { return !has(sn, "changes-n1") })
	if sn.Changed != ChangedNodes || !has(sn, "changes-n0") {
		t.Fatalf("a node left: changed %b, nodes %+v", sn.Changed, sn.Nodes)
	}

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

	// The block deleted: its routes and its pods go.
	if err := env.Client.IPAMBlocks().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sn = wait("the deleted block", func(sn Snapshot) bool { return !slices.Contains(sn.Routable, netip.MustParsePrefix("10.244.200.0/26")) })
	if sn.Changed != ChangedBlocks|ChangedPodIPs || len(sn.PodIPsChanged.Removed) != 2 {
		t.Fatalf("a block deleted: changed %b, PodIPsChanged %+v; want the blocks and its 2 pods' addresses out", sn.Changed, sn.PodIPsChanged)
	}
}

// The syncer after its first snapshot reads only the blocks that changed, and builds the
// blocks' part of a snapshot again only when one moved a route. Over random changes of every
// kind (a pod replaced, an address borrowed and returned, a block claimed, released, deleted,
// created, a pod of this node's), what it hands out is what Build gives from every block, and it
// says the routes changed exactly when Build's differ from the previous snapshot's.
func TestIncrementalBlocksMatchBuild(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const nodeName = "n0"
	blocks := map[string]*v1.IPAMBlock{}
	for i := range 12 {
		b := testBlock(i, "1", 4)
		blocks[b.Name] = b
	}
	rv := 1
	rng := rand.New(rand.NewPCG(1, 14))
	inputs := func() Inputs { return Inputs{NodeName: nodeName, Blocks: byKey(blocks)} }
	c := newViewCache()
	prev := build(inputs(), quiet, c)
	c.takeChanges()
	ips := c.podIPs()
	// change makes one random change to one block (or creates one) and returns its name.
	change := func() string {
		rv++
		i := rng.IntN(16)
		name := fmt.Sprintf("b%d", i)
		old, ok := blocks[name]
		if !ok {
			blocks[name] = testBlock(i, strconv.Itoa(rv), rng.IntN(4))
			return name
		}
		b := old.DeepCopy()
		b.ResourceVersion = strconv.Itoa(rv)
		ord := strconv.Itoa(rng.IntN(64))
		owner := strings.TrimPrefix(b.Spec.Affinity, v1.AffinityPrefixHost)
		switch rng.IntN(9) {
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
			delete(blocks, name)
			return name
		case 7: // a new version that changes nothing tabby reads
		case 8: // every address released (its node drained)
			clear(b.Spec.Allocations)
		}
		blocks[name] = b
		return name
	}
	for step := range 1000 {
		dirty := map[string]struct{}{}
		for range 1 + rng.IntN(3) {
			dirty[change()] = struct{}{}
		}
		c.updateBlocks(dirty, func(name string) *v1.IPAMBlock { return blocks[name] }, nodeName, quiet)
		snap := Snapshot{}
		changed := c.nextBlocks(&snap, &prev)
		want := Build(inputs(), quiet)
		policy.ApplyAddrs(ips, snap.PodIPsChanged.Removed, snap.PodIPsChanged.Added, func(PodKey) {})
		if !reflect.DeepEqual(ips, want.PodIPs) {
			t.Fatalf("step %d: the pods' addresses are %v, want %v", step, ips, want.PodIPs)
		}
		moved := !slices.Equal(want.LocalBlocks, prev.LocalBlocks) || !slices.Equal(want.Borrowed, prev.Borrowed) ||
			!slices.Equal(want.Routable, prev.Routable) || !slices.Equal(want.Workloads, prev.Workloads)
		if moved != (changed&ChangedBlocks != 0) {
			t.Fatalf("step %d: the blocks' routes moved: %v; the syncer says changed %b", step, moved, changed)
		}
		if !slices.Equal(snap.LocalBlocks, want.LocalBlocks) || !slices.Equal(snap.Borrowed, want.Borrowed) ||
			!slices.Equal(snap.Routable, want.Routable) || !slices.Equal(snap.Workloads, want.Workloads) {
			t.Fatalf("step %d: the incremental snapshot differs from Build:\n got %v %v %v %v\nwant %v %v %v %v", step,
				snap.LocalBlocks, snap.Borrowed, snap.Routable, snap.Workloads, want.LocalBlocks, want.Borrowed, want.Routable, want.Workloads)
		}
		prev = snap
	}
}

// After its first snapshot the syncer reads only the Nodes that changed. Over random changes
// (a node joins, leaves, is relabelled or readdressed, this node among them, a version that
// changes nothing tabby reads), its nodes and local node are what Build gives from every node.
func TestIncrementalNodesMatchBuild(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const nodeName = "n0"
	nodes := map[string]*corev1.Node{}
	rv := 1
	mk := func(i int) *corev1.Node {
		rv++
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), ResourceVersion: strconv.Itoa(rv),
			Labels:      map[string]string{"rack": fmt.Sprintf("r%d", i%3)},
			Annotations: map[string]string{v1.AnnotationBGPIPv4Address: fmt.Sprintf("198.51.100.%d/24", i+1)}}}
	}
	for i := range 8 {
		nodes[fmt.Sprintf("n%d", i)] = mk(i)
	}
	inputs := func() Inputs { return Inputs{NodeName: nodeName, Nodes: byKey(nodes)} }
	c := newViewCache()
	prev := build(inputs(), quiet, c)
	rng := rand.New(rand.NewPCG(2, 26))
	change := func() string {
		i := rng.IntN(12)
		name := fmt.Sprintf("n%d", i)
		old, ok := nodes[name]
		if !ok {
			nodes[name] = mk(i)
			return name
		}
		n := old.DeepCopy()
		rv++
		n.ResourceVersion = strconv.Itoa(rv)
		switch rng.IntN(4) {
		case 0:
			delete(nodes, name)
			return name
		case 1:
			n.Labels = map[string]string{"rack": fmt.Sprintf("r%d", rng.IntN(3))}
		case 2:
			n.Annotations = map[string]string{v1.AnnotationBGPIPv4Address: fmt.Sprintf("203.0.113.%d/24", rng.IntN(250)+1)}
		case 3: // a new version that changes nothing tabby reads
		}
		nodes[name] = n
		return name
	}
	for step := range 1000 {
		dirty := map[string]struct{}{}
		for range rng.IntN(4) { // none: a kick
			dirty[change()] = struct{}{}
		}
		got := c.nextNodes(prev.Nodes, dirty, func(name string) *corev1.Node { return nodes[name] }, quiet)
		local := localNode(got, nodeName)
		want := Build(inputs(), quiet)
		if len(got) != len(want.Nodes) || (len(got) > 0 && !reflect.DeepEqual(got, want.Nodes)) {
			t.Fatalf("step %d: nodes\n got %+v\nwant %+v", step, got, want.Nodes)
		}
		if !reflect.DeepEqual(local, want.Local) {
			t.Fatalf("step %d: local node %+v, want %+v", step, local, want.Local)
		}
		if len(prev.Nodes) > 0 && len(dirty) > 0 && len(got) > 0 && &got[0] == &prev.Nodes[0] {
			t.Fatalf("step %d: the previous snapshot's nodes were changed in place", step)
		}
		prev.Nodes = got
	}
	if len(c.nodes) != len(nodes) {
		t.Fatalf("the cache holds %d nodes, the datastore %d: deleted nodes are kept", len(c.nodes), len(nodes))
	}
}

// byKey lists a test datastore's objects in name order.
func byKey[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}
