package lab

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestStubLab proves the lab's own machinery with the reference plugins standing in for tabby:
// namespaces and the switch, API server reachability from a node namespace through the
// forwarder, pods through libcni, the ping matrix, the internet behind the router, the chart's
// CNI config rendered for a node, and a teardown that leaves nothing.
func TestStubLab(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and the control plane (skipped under -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := New(ctx, Options{Stub: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			if t.Failed() {
				t.Log(l.Diagnostics(context.Background()))
			}
			_ = l.Close(context.Background())
		}
	})
	nodes, err := l.AddNodes(ctx, NodeSpec{Name: "node-1"}, NodeSpec{Name: "node-2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodes[0].IP().String(); got != "198.51.100.11" {
		t.Errorf("node-1 address %s, want 198.51.100.11 (addresses follow the order given)", got)
	}

	// The node's kubeconfig works from inside its namespace (and only there).
	cfg, err := clientcmd.BuildConfigFromFlags("", nodes[0].Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, nodes[0].NS, addr) }
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.Discovery().ServerVersion(); err != nil {
		t.Fatalf("API server from node-1's namespace: %v", err)
	}

	if _, err := l.AddPods(ctx, PodSpec{Name: "a", Node: "node-1"}, PodSpec{Name: "b", Node: "node-1"}, PodSpec{Name: "c", Node: "node-2"}); err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithTimeout(ctx, 20*time.Second)
	m := PingMatrix(mctx, l.PodEndpoints(), append(l.PodEndpoints(), l.NodeEndpoints()...))
	mcancel()
	if f := m.Failures(); len(f) > 0 {
		t.Fatalf("unreachable: %v\n%s", f, m)
	}
	if err := Ping(ctx, nodes[0].NS, InternetHost); err != nil {
		t.Errorf("node-1 does not reach the internet host: %v", err)
	}
	if err := l.DeletePod(ctx, "b"); err != nil {
		t.Fatal(err)
	}

	// The tabby CNI config a node gets: the chart's template (or the built-in one), with the
	// node's own name, kubeconfig and IPAM socket.
	l.Opts.Stub = false
	raw, err := l.Conflist(nodes[1])
	l.Opts.Stub = true
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		t.Fatal(err)
	}
	tabby := conf.Plugins[0]
	if tabby["type"] != "tabby" || tabby["nodename"] != "node-2" || tabby["ipamSocket"] != nodes[1].IPAMSocket() || tabby["kubeconfig"] != nodes[1].Kubeconfig {
		t.Errorf("tabby plugin config for node-2: %v", tabby)
	}
	t.Logf("objects from %s; node-2's conflist: %s", l.Chart, raw)

	// A lab starting while this one closes must never take this one's namespaces for a dead
	// lab's leftovers: watch for that throughout the close, as fast as FindLeftovers goes.
	id := l.ID
	closed = true
	stop := make(chan struct{})
	seen := make(chan string, 1)
	go func() {
		defer close(seen)
		for {
			select {
			case <-stop:
				return
			default:
			}
			left, err := FindLeftovers()
			if err != nil {
				continue
			}
			for _, n := range left.Netns {
				if strings.HasPrefix(n, NetnsPrefix+id+"-") {
					seen <- n
					return
				}
			}
		}
	}()
	err = l.Close(ctx)
	close(stop)
	if n, ok := <-seen; ok {
		t.Errorf("while the lab closed, its namespace %s looked like a dead lab's leftover", n)
	}
	if err != nil {
		t.Fatal(err)
	}
	names, _ := listNetns()
	for _, n := range names {
		if strings.HasPrefix(n, NetnsPrefix+id+"-") {
			t.Errorf("namespace %s left behind", n)
		}
	}
	if _, err := os.Stat(l.Dir); err == nil {
		t.Errorf("state directory %s left behind", l.Dir)
	}
}

// TestLeftoversRefused: a lab whose owner died blocks new labs until cleanup removes it.
func TestLeftoversRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root (skipped under -short)")
	}
	ctx := context.Background()
	stateRoot, netnsPrefix = t.TempDir(), "tt-"
	t.Cleanup(func() { stateRoot, netnsPrefix = StateRoot, NetnsPrefix })
	id := "dead"
	dir := stateRoot + "/" + id
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// pid 1's start time never matches this: the owner is dead.
	if err := writeOwner(dir, owner{PID: 1, Start: "0"}); err != nil {
		t.Fatal(err)
	}
	ns := netnsPrefix + id + "-x"
	if err := addNetns(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = delNetns(ctx, ns); _ = os.RemoveAll(dir) })
	_, err := New(ctx, Options{Stub: true})
	if err == nil || !strings.Contains(err.Error(), CleanupCommand) || !strings.Contains(err.Error(), ns) {
		t.Fatalf("New with leftovers: %v, want a refusal naming %s and %q", err, ns, CleanupCommand)
	}
	left, err := Cleanup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(left.String(), ns) {
		t.Errorf("cleanup removed %s, want %s among them", left, ns)
	}
	if _, err := os.Stat(NetnsPath(ns)); !os.IsNotExist(err) {
		t.Errorf("%s still exists after cleanup", ns)
	}
}

// TestStateDirInTheMaking: a state directory being made (no owner yet) is not a leftover; one
// whose maker wrote its owner and died before the rename is.
func TestStateDirInTheMaking(t *testing.T) {
	stateRoot, netnsPrefix = t.TempDir(), "tt-"
	t.Cleanup(func() { stateRoot, netnsPrefix = StateRoot, NetnsPrefix })
	making, died := stateRoot+"/.ab12-1", stateRoot+"/.cd34-2"
	for _, d := range []string{making, died} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeOwner(died, owner{PID: 1, Start: "0"}); err != nil {
		t.Fatal(err)
	}
	left, err := FindLeftovers()
	if err != nil {
		t.Fatal(err)
	}
	if len(left.StateDirs) != 1 || left.StateDirs[0] != died {
		t.Errorf("leftover state directories %v, want only %s", left.StateDirs, died)
	}
	if err := makeStateDir(stateRoot+"/ef56", selfOwner()); err != nil {
		t.Fatal(err)
	}
	if err := makeStateDir(stateRoot+"/ef56", selfOwner()); err == nil {
		t.Error("a second lab with id ef56 was given the same state directory")
	}
	if o, err := readOwner(stateRoot + "/ef56"); err != nil || !o.alive() {
		t.Errorf("owner of ef56: %v, %v; want this process", o, err)
	}
	// Daemons running as their own users (FRR) work inside it.
	if fi, err := os.Stat(stateRoot + "/ef56"); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("state directory mode %v (%v), want 0755", fi.Mode().Perm(), err)
	}
}

func TestParsePeers(t *testing.T) {
	out := `tabby-node is running.

IPv4 BGP status
+---------------+-------------------+-------+----------+-------------+----------------------+
| PEER ADDRESS  |     PEER TYPE     | STATE |  SINCE   |    INFO     | ROUTES RECV/ACC/SENT |
+---------------+-------------------+-------+----------+-------------+----------------------+
| 198.51.100.12 | node-to-node mesh | up    | 08:01:02 | Established | ipv4 1/1/1           |
| 198.51.100.13 | node-to-node mesh | start | 08:01:02 | Active      | ipv4 -               |
+---------------+-------------------+-------+----------+-------------+----------------------+

IPv6 BGP status
No IPv6 peers found.
`
	ps, err := ParsePeers(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || !ps[0].Established() || ps[1].Established() || ps[1].Address != "198.51.100.13" {
		t.Fatalf("parsed %+v", ps)
	}
}
