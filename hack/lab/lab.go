// Package lab runs a multi-node tabby cluster on one machine: a real etcd and kube-apiserver,
// node network namespaces on one or two subnets (a bridge in a switch namespace, a router
// namespace with "the internet" behind it, optionally a real BGP router as ToR), the real
// tabby-node agent in every node namespace, and pods as namespaces wired by the tabby CNI plugin
// through libcni, as a container runtime would. Everything it makes is named tl-<id>-<role> and
// removed on Close; a dead lab's leftovers are found and removed by Cleanup.
package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
)

// Addresses of the lab network (never 192.0.2.0/24: the test machines' own uplink).
var (
	SubnetA      = netip.MustParsePrefix("198.51.100.0/25")
	SubnetB      = netip.MustParsePrefix("198.51.100.128/25")
	RouterA      = netip.MustParseAddr("198.51.100.1")
	RouterB      = netip.MustParseAddr("198.51.100.129")
	InternetNet  = netip.MustParsePrefix("203.0.113.0/24")
	RouterInet   = netip.MustParseAddr("203.0.113.1")
	InternetHost = netip.MustParseAddr("203.0.113.100")
	PodCIDR      = netip.MustParsePrefix("10.244.0.0/16")
	// HostAddr is the root namespace's address on subnet A with Options.HostLink.
	HostAddr = netip.MustParsePrefix("198.51.100.126/25")
	// firstNodeHost is the host number of the first node on each subnet (.11 and .139).
	firstNodeHost = 10
)

// Options describe a lab.
type Options struct {
	// ID names the lab's namespaces (tl-<ID>-…); 4 random hex digits when empty.
	ID string
	// TwoSubnets puts nodes on subnet A (198.51.100.0/25) or B (198.51.100.128/25), joined by the
	// router; otherwise every node is on subnet A.
	TwoSubnets bool
	// TabbyBin holds tabby, tabby-node and tabbyctl; default $TABBY_BIN, else <repo>/bin.
	TabbyBin string
	// RepoDir is the tabby checkout (for the chart); found from the working directory if empty.
	RepoDir string
	// HelmSet are extra `--set` values for the chart.
	HelmSet []string
	// Stub wires pods with the reference ptp + host-local plugins and static routes instead of
	// tabby: it proves the lab's own machinery without tabby-node.
	Stub bool
	// External, if set, is an API server that already runs (the qemu guest reaches the host's);
	// the lab then starts no control plane and installs nothing.
	External *External
	// Families are the address families of the pods (and the underlay): IPv4Only by default.
	Families Families
	// VXLAN is the vxlanMode of the lab's pools, of both families (the chart's
	// ipPool.vxlanMode and ipv6Pool.vxlanMode); empty: Never, routed natively.
	VXLAN v1.VXLANMode
	// NoBGP runs every tabby-node without BGP (--bgp=none, the chart's bgp.enabled=false):
	// pods on other nodes are then reached through VXLAN pools alone.
	NoBGP bool
	// AgentArgs are extra tabby-node flags for every node (e.g. a short --ipam-gc-grace).
	AgentArgs []string
	// HostLink joins the root namespace to subnet A's switch at HostAddr and binds the control
	// plane there, as in a real cluster: the nodes, and pods through the `kubernetes` Service,
	// reach the API server on the underlay, and the API server reaches the kubelets (exec,
	// logs). One lab with a host link runs at a time (the root namespace has one route to A).
	HostLink bool
	// KubeletNodes leaves the nodes to kubelets the caller starts: AddNode makes the namespace
	// and its address only (no Node object, no tabby-node), and the cluster objects are left
	// to `helm install` of the chart.
	KubeletNodes bool
	// ReadyTimeout bounds the wait for a started tabby-node's /readyz (60 s when zero; a
	// guest under software emulation needs more).
	ReadyTimeout time.Duration
	// Typha runs this many tabby-typha replicas, and every tabby-node watches through them
	// (each node reaches replica i at 127.0.0.1:5473+i, as it reaches the API server).
	Typha int
	// FlowLogs turns felix's flow logs on (FelixConfiguration flowLogs.enabled, a 1 s flush
	// interval); every node serves them, and its BGP status, on its observation endpoint
	// either way (Node.ObserveAddr, from the root namespace).
	FlowLogs bool
	// Log receives progress; slog.Default() when nil.
	Log *slog.Logger
}

// External is an API server the lab uses instead of starting one.
type External struct {
	URL   string // https://host:port, reachable from the root namespace
	Token string
}

// Lab is a running lab.
type Lab struct {
	ID       string
	Dir      string // state directory: /run/tabby-lab/<id>
	Opts     Options
	Env      *testenv.Env // nil with External
	Config   *rest.Config
	Client   *client.Client
	Kube     kubernetes.Interface
	Kubecfg  string // admin kubeconfig (root namespace)
	TabbyBin string
	CNIPath  []string
	// Chart tells where the cluster objects came from ("chart" or "apis/crds fallback: …").
	Chart   string
	chart   *chartOutput
	token   string
	apiAddr string // host:port the forwarders dial
	// Typhas are the tabby-typha replicas (Options.Typha), on the host; typhaCA verifies them.
	Typhas  []*Typha
	typhaCA string
	// The nodes' observation endpoint: its CA, and the certificate and key every node serves.
	observeCA, observeCert, observeKey string
	log                                *slog.Logger

	// stubMu: one stub resync at a time. Two at once (nodes added side by side) interleave
	// their flushes and writes, and the one that read fewer nodes wins on some node.
	stubMu   sync.Mutex
	mu       sync.Mutex
	nodes    map[string]*Node
	pods     map[string]*Pod
	nextIdx  [2]int // next host number per subnet
	reserved map[string]bool
	portSeq  int
	linkSeq  int
	router   *Router
	closers  []func(context.Context) error // run in reverse on Close
	closed   bool
}

// NetnsName is the lab's name for one of its namespaces.
func (l *Lab) NetnsName(role string) string { return netnsPrefix + l.ID + "-" + role }

// New builds a lab: state directory, control plane and cluster objects, switch, router and the
// internet namespace. Nodes and pods are added with AddNode and AddPod. On error everything made
// so far is removed.
func New(ctx context.Context, o Options) (_ *Lab, err error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the lab needs root (network namespaces)")
	}
	left, err := FindLeftovers()
	if err != nil {
		return nil, err
	}
	if !left.Empty() {
		return nil, fmt.Errorf("a previous lab left things behind (%s): remove them with `%s`", left, CleanupCommand)
	}
	if o.ID == "" {
		b := make([]byte, 2)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		o.ID = hex.EncodeToString(b)
	}
	if o.Stub && o.Families != IPv4Only {
		return nil, fmt.Errorf("the stub lab is IPv4 only (families %s)", o.Families)
	}
	if o.Stub && (o.VXLAN != "" || o.NoBGP) {
		return nil, errors.New("the stub lab has no tabby-node: no VXLAN pool, no --bgp=none")
	}
	if len(o.ID) > 4 {
		return nil, fmt.Errorf("lab id %q: at most 4 characters", o.ID)
	}
	l := &Lab{ID: o.ID, Opts: o, log: o.Log, nodes: map[string]*Node{}, pods: map[string]*Pod{}}
	l.Dir = filepath.Join(stateRoot, l.ID)
	if err := os.MkdirAll(stateRoot, 0o755); err != nil {
		return nil, err
	}
	if err := makeStateDir(l.Dir, selfOwner()); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = l.Close(cctx)
		}
	}()

	if err := l.findBinaries(ctx); err != nil {
		return nil, err
	}
	if o.HostLink {
		if err := l.addHostLink(ctx); err != nil {
			return nil, fmt.Errorf("host link: %w", err)
		}
	}
	if err := l.startControlPlane(ctx); err != nil {
		return nil, err
	}
	if err := l.startTyphas(ctx); err != nil {
		return nil, err
	}
	if err := l.setupObserve(ctx); err != nil {
		return nil, fmt.Errorf("observation endpoint: %w", err)
	}
	if err := l.buildUnderlay(ctx); err != nil {
		return nil, fmt.Errorf("build lab network: %w", err)
	}
	return l, nil
}

func (l *Lab) onClose(f func(context.Context) error) {
	l.mu.Lock()
	l.closers = append(l.closers, f)
	l.mu.Unlock()
}

// Close removes everything the lab made: agents, routers, pods, namespaces, the control plane
// and the state directory. It is safe to call twice.
func (l *Lab) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	nodes := l.sortedNodes()
	closers := l.closers
	l.mu.Unlock()
	var errs []error
	// Agents first and all at once: a stopping agent must not see its peers vanish one by one.
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.teardown(ctx) }()
	}
	wg.Wait()
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Anything named after this lab that a failed step left unregistered.
	if names, err := listNetns(); err == nil {
		for _, n := range names {
			if id, ok := labIDOf(n); ok && id == l.ID {
				if err := delNetns(ctx, n); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// The owner file goes last: while any namespace of this lab exists, a lab starting beside
	// it must see a live owner, not a dead lab's leftovers.
	if err := os.RemoveAll(l.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (l *Lab) sortedNodes() []*Node {
	ns := make([]*Node, 0, len(l.nodes))
	for _, n := range l.nodes {
		ns = append(ns, n)
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	return ns
}

// AddNodes adds nodes in parallel (their agents start together, as a DaemonSet's would).
func (l *Lab) AddNodes(ctx context.Context, specs ...NodeSpec) ([]*Node, error) {
	nodes := make([]*Node, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	// Addresses in the order given; the slow part (agents starting) in parallel.
	reserved := make([]*Node, len(specs))
	for i, s := range specs {
		if reserved[i], errs[i] = l.reserveNode(s); errs[i] != nil {
			return nil, errs[i]
		}
	}
	for i := range specs {
		wg.Add(1)
		go func() { defer wg.Done(); nodes[i], errs[i] = l.addNode(ctx, reserved[i]) }()
	}
	wg.Wait()
	return nodes, errors.Join(errs...)
}

// AddPods adds pods in parallel.
func (l *Lab) AddPods(ctx context.Context, specs ...PodSpec) ([]*Pod, error) {
	pods := make([]*Pod, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, s := range specs {
		wg.Add(1)
		sem <- struct{}{}
		go func() { defer wg.Done(); defer func() { <-sem }(); pods[i], errs[i] = l.AddPod(ctx, s) }()
	}
	wg.Wait()
	return pods, errors.Join(errs...)
}

// Nodes are the lab's nodes, by name.
func (l *Lab) Nodes() []*Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sortedNodes()
}

// Node returns a node by name, nil if there is none.
func (l *Lab) Node(name string) *Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nodes[name]
}

// Pods are the lab's pods, by key (see Pod.Key).
func (l *Lab) Pods() []*Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := make([]*Pod, 0, len(l.pods))
	for _, p := range l.pods {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Key() < ps[j].Key() })
	return ps
}

// Router is the lab's router namespace (the default gateway of every node).
func (l *Lab) Router() *Router { return l.router }

func (l *Lab) findBinaries(ctx context.Context) error {
	bin := l.Opts.TabbyBin
	if bin == "" {
		bin = os.Getenv("TABBY_BIN")
	}
	if bin == "" {
		repo, err := l.repoDir()
		if err != nil {
			return err
		}
		bin = filepath.Join(repo, "bin")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	l.TabbyBin = abs
	need := []string{"tabby", "tabby-node", "tabbyctl"}
	if l.Opts.Typha > 0 {
		need = append(need, "tabby-typha")
	}
	if l.Opts.Stub {
		need = nil
	}
	for _, b := range need {
		if _, err := os.Stat(filepath.Join(abs, b)); err != nil {
			return fmt.Errorf("tabby binary %s missing in %s: run `make build` (or set TABBY_BIN)", b, abs)
		}
	}
	ref, err := ReferencePlugins(ctx)
	if err != nil {
		return err
	}
	l.CNIPath = []string{abs, ref}
	return nil
}

// apiTarget is the host:port of an API server URL.
func apiTarget(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("api server url %q: %w", u, err)
	}
	if _, _, err := net.SplitHostPort(p.Host); err != nil {
		return "", fmt.Errorf("api server url %q: %w", u, err)
	}
	return p.Host, nil
}
