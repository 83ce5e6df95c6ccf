package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/selector"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/internal/grpcjson"
	"github.com/tabbynet/tabby/ipam"
	ipamgc "github.com/tabbynet/tabby/ipam/gc"
	ipamrpc "github.com/tabbynet/tabby/ipam/rpc"
	"github.com/tabbynet/tabby/node/installcni"
	"github.com/tabbynet/tabby/node/syncer"
)

// Agent is one running tabby-node.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	client *client.Client
	reg    *prometheus.Registry

	felix  *felix.Felix
	bgp    *bird.Bird
	alloc  *ipam.Allocator
	store  ipam.Store
	syncer *syncer.Syncer

	tunnelKick chan struct{}
	firstSnap  chan struct{} // closed by the first snapshot
	firstOnce  sync.Once
	mu         sync.Mutex
	last       syncer.Snapshot
}

// Run runs tabby-node until ctx ends, then shuts down as cfg.Shutdown says.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.defaults()
	restCfg, err := client.LoadConfig(cfg.Kubeconfig, "")
	if err != nil {
		return err
	}
	c, err := client.New(restCfg)
	if err != nil {
		return err
	}
	a := &Agent{cfg: cfg, log: log, client: c, reg: prometheus.NewRegistry(), tunnelKick: make(chan struct{}, 1), firstSnap: make(chan struct{})}
	a.reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))

	self, err := a.waitForNode(ctx)
	if err != nil {
		return err
	}
	addr, uplink, err := detectAddress(cfg.BGPAddress, self)
	if err != nil {
		return err
	}
	log.Info("BGP address detected", "address", addr, "interface", uplink, "method", methodName(cfg.BGPAddress))
	if err := a.recordAddress(ctx, self, addr); err != nil {
		return err
	}

	a.store = ipam.NewKubeStore(c)
	a.alloc = ipam.New(a.store, ipam.Config{Logger: log.With("component", "ipam")})
	if a.felix, err = felix.New(felix.Config{
		NodeName: cfg.NodeName, UplinkInterface: uplink, TunnelMTU: tunnelMTU(cfg.MTU),
		WorkloadGracePeriod: cfg.WorkloadGrace, ResyncInterval: cfg.ResyncInterval,
		WaitForInSync: true,
	}, felix.WithLogger(log.With("component", "felix")), felix.WithRegistry(a.reg)); err != nil {
		return fmt.Errorf("start felix: %w", err)
	}
	if a.bgp, err = bird.New(bird.Config{
		NodeName: cfg.NodeName, GoBGPAPI: cfg.GoBGPAPI,
		StatusSocket: filepath.Join(cfg.RunDir, "bird.sock"),
		OnRoute:      a.onBGPRoute,
		Logger:       log.With("component", "bird"),
	}); err != nil {
		return fmt.Errorf("start bird: %w", err)
	}
	a.reg.MustRegister(a.bgp.Collectors()...)
	a.syncer = syncer.New(c, syncer.Config{NodeName: cfg.NodeName, Namespace: cfg.Namespace, OnSnapshot: a.onSnapshot, Logger: log.With("component", "syncer")})

	ipamSrv, err := a.serveIPAM()
	if err != nil {
		return err
	}
	health, err := a.serveHTTP(cfg.HealthAddr, a.healthMux())
	if err != nil {
		return err
	}
	metrics, err := a.serveHTTP(cfg.MetricsAddr, a.metricsMux())
	if err != nil {
		return err
	}

	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	g, gctx := errgroup.WithContext(runCtx)
	// felix stops first on shutdown: the speaker's own shutdown withdraws what it learned, and
	// felix must not turn that into route deletions in a kernel that keeps forwarding.
	felixCtx, stopFelix := context.WithCancel(gctx)
	felixDone := make(chan struct{})
	g.Go(func() error {
		defer close(felixDone)
		return a.felix.Run(felixCtx)
	})
	g.Go(func() error {
		// bird computes its sessions from the nodes: start it with the first snapshot.
		select {
		case <-gctx.Done():
			return nil
		case <-a.firstSnap:
		}
		return a.bgp.Run(gctx)
	})
	g.Go(func() error { return a.syncer.Run(gctx) })
	g.Go(func() error { return a.runTunnelAddress(gctx) })
	g.Go(func() error { return a.runGC(gctx) })
	g.Go(func() error { return a.clearRestartMark(gctx) })
	g.Go(func() error { return a.declareInSync(gctx) })
	if cfg.CNIKubeconfig != "" {
		g.Go(func() error { return a.refreshCNIKubeconfig(gctx) })
	}

	select {
	case <-ctx.Done():
	case <-gctx.Done():
	}
	log.Info("shutting down", "mode", cfg.Shutdown)
	stopFelix()
	<-felixDone
	shutdownErr := a.shutdown(context.Background())
	ipamSrv.GracefulStop()
	_ = health.Close()
	_ = metrics.Close()
	stopRun()
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return shutdownErr
}

func (c *Config) defaults() {
	if c.Shutdown == "" {
		c.Shutdown = "restart"
	}
	if c.RestartGrace == 0 {
		c.RestartGrace = 120 * time.Second
	}
	if c.GCInterval == 0 {
		c.GCInterval = time.Minute
	}
	if c.GCGrace == 0 {
		c.GCGrace = 5 * time.Minute
	}
}

func tunnelMTU(mtu int) int {
	if mtu > 0 {
		return mtu - 20
	}
	return 0
}

func (a *Agent) waitForNode(ctx context.Context) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		n, err := a.client.Kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err == nil {
			return n, nil
		}
		a.log.Warn("waiting for this node's Node object", "node", a.cfg.NodeName, "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("get Node %s: %w", a.cfg.NodeName, err)
		case <-time.After(time.Second):
		}
	}
}

// recordAddress writes the detected address into the Node annotation felix and the other nodes'
// speakers read.
func (a *Agent) recordAddress(ctx context.Context, n *corev1.Node, addr netip.Prefix) error {
	if n.Annotations[v1.AnnotationBGPIPv4Address] == addr.String() {
		return nil
	}
	return a.patchAnnotations(ctx, map[string]*string{v1.AnnotationBGPIPv4Address: ptr(addr.String())})
}

// patchAnnotations sets (or, with a nil value, removes) annotations on this node's Node.
func (a *Agent) patchAnnotations(ctx context.Context, ann map[string]*string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	if _, err := a.client.Kube.CoreV1().Nodes().Patch(ctx, a.cfg.NodeName, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotate Node %s: %w", a.cfg.NodeName, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// onSnapshot hands the new desired state to felix and bird. Advertised prefixes go to bird before
// its peers (End-of-RIB is sent as soon as a session is up).
func (a *Agent) onSnapshot(s syncer.Snapshot) {
	a.mu.Lock()
	a.last = s
	a.mu.Unlock()

	var pools []felix.Pool
	for _, p := range s.Pools {
		pools = append(pools, felix.Pool{Name: p.Name, CIDR: netip.MustParsePrefix(p.Spec.CIDR), IPIPMode: p.Spec.IPIPMode, NATOutgoing: p.Spec.NATOutgoing, Disabled: p.Spec.Disabled})
	}
	var workloads []felix.Workload
	for _, w := range s.Workloads {
		workloads = append(workloads, felix.Workload{IP: w.IP, Interface: w.Interface})
	}
	if s.Local != nil {
		a.felix.SetLocalNode(s.Local.BGPAddress, s.Local.TunnelAddr)
	}
	a.felix.SetPools(pools)
	a.felix.SetLocalBlocks(s.LocalBlocks)
	a.felix.SetWorkloads(workloads)

	a.bgp.SetPools(s.PoolPrefixes())
	a.bgp.SetLocalPrefixes(s.AdvertisedPrefixes())
	a.bgp.SetBGPConfiguration(s.BGPConfig)
	a.bgp.SetSecrets(s.Secrets)
	a.bgp.SetBGPPeers(s.BGPPeers)
	a.bgp.SetNodes(birdNodes(s.Nodes))

	select {
	case a.tunnelKick <- struct{}{}:
	default:
	}
	a.firstOnce.Do(func() { close(a.firstSnap) })
}

func birdNodes(nodes []syncer.NodeInfo) []bird.Node {
	out := make([]bird.Node, 0, len(nodes))
	for _, n := range nodes {
		addr := n.BGPAddress
		if !addr.IsValid() && n.InternalIP.IsValid() {
			addr = netip.PrefixFrom(n.InternalIP, 32)
		}
		out = append(out, bird.Node{Name: n.Name, Labels: n.Labels, Address: addr, ASN: n.ASN, RRClusterID: n.RRClusterID, RestartingUntil: n.RestartingUntil})
	}
	return out
}

// onBGPRoute passes a learned best path to felix, which picks the device.
func (a *Agent) onBGPRoute(u bird.RouteUpdate) {
	if u.Withdrawn {
		a.felix.DeleteBGPRoute(u.Prefix)
		return
	}
	a.felix.UpsertBGPRoute(felix.BGPRoute{Prefix: u.Prefix, NextHop: u.NextHop})
}

func (a *Agent) serveIPAM() (*grpc.Server, error) {
	l, err := grpcjson.Listen(filepath.Join(a.cfg.RunDir, "ipam.sock"))
	if err != nil {
		return nil, fmt.Errorf("IPAM service: %w", err)
	}
	srv := grpc.NewServer(grpcjson.ServerOptions()...)
	ipamrpc.NewServer(a.alloc).Register(srv)
	go func() {
		if err := srv.Serve(l); err != nil {
			a.log.Error("IPAM service stopped", "error", err)
		}
	}()
	return srv, nil
}

func (a *Agent) healthMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.felix.Ready() {
			http.Error(w, "felix has not applied the dataplane yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

func (a *Agent) metricsMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	return mux
}

func (a *Agent) serveHTTP(addr string, h http.Handler) (*http.Server, error) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	if addr == "" {
		return srv, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("HTTP server stopped", "addr", addr, "error", err)
		}
	}()
	return srv, nil
}

// shutdown: restart-style marks the node as restarting first, so peers honour graceful restart,
// then leaves sessions without a Cease and the kernel routes in place.
func (a *Agent) shutdown(ctx context.Context) error {
	if a.cfg.Shutdown == "final" {
		return a.bgp.Stop(false)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	deadline := time.Now().Add(a.cfg.RestartGrace).UTC().Format(time.RFC3339)
	if err := a.patchAnnotations(ctx, map[string]*string{syncer.AnnotationRestarting: &deadline}); err != nil {
		a.log.Error("could not mark the node as restarting: peers will treat this as a dead node", "error", err)
	}
	return a.bgp.Stop(true)
}

// clearRestartMark removes this node's restart mark (left by the previous run's shutdown) once
// its sessions are back, or the grace has passed, so a later session loss counts as a dead node.
func (a *Agent) clearRestartMark(ctx context.Context) error {
	n, err := a.client.Kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil || n.Annotations[syncer.AnnotationRestarting] == "" {
		return nil
	}
	deadline := time.Now().Add(a.cfg.RestartGrace)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for !allEstablished(a.bgp.Peers()) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	if err := a.patchAnnotations(ctx, map[string]*string{syncer.AnnotationRestarting: nil}); err != nil {
		a.log.Warn("clear restart mark", "error", err)
	}
	return nil
}

// runGC releases addresses whose pods are gone (after a grace period and a second look); on the
// node whose name sorts first it also releases deleted nodes' IPAM (ipam/gc, nodes.go).
func (a *Agent) runGC(ctx context.Context) error {
	c := ipamgc.New(a.store, a.alloc, ipamgc.Config{Node: a.cfg.NodeName, GracePeriod: a.cfg.GCGrace, Logger: a.log.With("component", "ipam-gc")})
	if err := c.Run(ctx, a.cfg.GCInterval); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("IPAM GC: %w", err)
	}
	return nil
}

// runTunnelAddress keeps this node's tunl0 address allocated while a pool needs IPIP (and released
// when none does); felix learns it from the Node annotation the allocator writes.
func (a *Agent) runTunnelAddress(ctx context.Context) error {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.tunnelKick:
		case <-retry.C:
		}
		a.mu.Lock()
		want := needsTunnel(a.last)
		have := a.last.Local != nil && a.last.Local.TunnelAddr.IsValid()
		a.mu.Unlock()
		if want == have {
			continue
		}
		addr, needed, err := a.alloc.EnsureTunnelAddress(ctx, a.cfg.NodeName)
		if err != nil {
			a.log.Error("tunnel address", "error", err)
			retry.Reset(5 * time.Second)
			continue
		}
		a.log.Info("tunnel address", "address", addr, "needed", needed)
	}
}

// needsTunnel: an enabled IPIP pool selects this node (the allocator decides the same way; this
// only spares it a call per snapshot).
func needsTunnel(s syncer.Snapshot) bool {
	if s.Local == nil {
		return false
	}
	for _, p := range s.Pools {
		if p.Spec.Disabled || p.Spec.IPIPMode == "" || p.Spec.IPIPMode == v1.IPIPModeNever {
			continue
		}
		if sel, err := selector.Parse(p.Spec.NodeSelector); err == nil && sel.Matches(s.Local.Labels) {
			return true
		}
	}
	return false
}

func allEstablished(peers []bird.PeerStatus) bool {
	for _, p := range peers {
		if p.State != "established" {
			return false
		}
	}
	return true
}

// refreshCNIKubeconfig keeps the CNI plugins' kubeconfig (their direct path to the API server
// while tabby-node's socket is down) valid as the service account token rotates.
func (a *Agent) refreshCNIKubeconfig(ctx context.Context) error {
	o := installcni.Defaults()
	o.NodeName = a.cfg.NodeName
	o.HostNetDir, o.KubeconfigName = filepath.Split(a.cfg.CNIKubeconfig)
	o.Logger = a.log.With("component", "install-cni")
	if err := installcni.KeepKubeconfigFresh(ctx, o, 10*time.Minute); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("keep the CNI kubeconfig fresh: %w", err)
	}
	return nil
}

// inSyncGrace bounds how long felix keeps routes it has not re-learned when a peer does not come
// back: past it, what BGP has not confirmed is stale.
const inSyncGrace = 30 * time.Second

// declareInSync lets felix remove stale state once it knows everything again: the datastore has
// synced (the first snapshot) and every BGP peer that is up has sent its End-of-RIB — re-learn,
// re-advertise, and only then remove what is stale.
func (a *Agent) declareInSync(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.firstSnap:
	}
	if err := a.bgp.WaitSynced(ctx, inSyncGrace); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		a.log.Warn("BGP did not sync: removing stale routes anyway", "error", err)
	}
	a.felix.SetInSync()
	return nil
}
