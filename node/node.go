package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/internal/version"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/podcache"
	"github.com/tabbynet/tabby/lbipam/controller"
	"github.com/tabbynet/tabby/node/ipammetrics"
	"github.com/tabbynet/tabby/node/syncer"
	"github.com/tabbynet/tabby/policystatus"
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
	pods   *podcache.Cache
	syncer *syncer.Syncer
	policy *syncer.PolicyWatcher

	tunnel     *tunnelNeed
	tunnelKick chan struct{}
	synced     chan struct{} // closed once the syncer has sent every object (model.InSync)
	syncedOnce sync.Once
	// flowLogsOn: the FelixConfiguration enables flow logs (felix records them).
	flowLogsOn atomic.Bool
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
	if c, err = withTypha(c, restCfg, cfg, log); err != nil {
		return err
	}
	a := &Agent{cfg: cfg, log: log, client: c, reg: prometheus.NewRegistry(), tunnelKick: make(chan struct{}, 1), synced: make(chan struct{})}
	a.tunnel = newTunnelNeed(cfg.NodeName)
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if fan := c.Fanout(); fan != nil {
		a.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tabby_datastore_via_typha",
			Help: "1 while every cluster-wide watch goes through tabby-typha, 0 while one or more goes to the API server directly (no replica answered)."},
			func() float64 {
				if fan.ViaTypha() {
					return 1
				}
				return 0
			}))
	}

	self, err := a.waitForNode(ctx)
	if err != nil {
		return err
	}
	var addrs ipfamily.Pair[netip.Prefix]
	var uplinks ipfamily.Pair[string]
	for _, fam := range ipfamily.All {
		method := cfg.BGPAddress.Get(fam)
		addr, uplink, err := detectAddress(fam, method, self)
		if err != nil {
			return err
		}
		if addr.IsValid() {
			log.Info("BGP address detected", "family", fam, "address", addr, "interface", uplink, "method", methodName(method))
		} else {
			log.Info("no BGP address of this family: the node does without it", "family", fam, "method", methodName(method))
		}
		addrs.Set(fam, addr)
		uplinks.Set(fam, uplink)
	}
	if !addrs.Get(ipfamily.IPv4).IsValid() && !addrs.Get(ipfamily.IPv6).IsValid() {
		return fmt.Errorf("node %s has neither an IPv4 nor an IPv6 BGP address (--bgp-address=%s, --bgp-address6=%s)", cfg.NodeName,
			methodName(cfg.BGPAddress.Get(ipfamily.IPv4)), methodName(cfg.BGPAddress.Get(ipfamily.IPv6)))
	}
	if err := a.recordAddresses(ctx, self, addrs); err != nil {
		return err
	}

	a.store = ipam.NewKubeStore(c)
	a.pods = podcache.New(c, cfg.NodeName)
	// The allocator lists from the API server's watch cache (it never relies on a fresh list,
	// and a consistent one waits for that cache to catch up with etcd, which held up every
	// block claim); so does the garbage collector's first look (gcLists), its second look reads
	// consistently.
	// Pools and blocks come from the syncer's informers (set below, before the IPAM socket serves).
	a.alloc = ipam.New(ipam.NewKubeStore(c).ListsFromCache(), ipam.Config{Logger: log.With("component", "ipam"), PodAnnotations: a.pods.Annotations,
		Pools: func() ([]v1.IPPool, bool) {
			if a.syncer == nil {
				return nil, false
			}
			return a.syncer.Pools()
		},
		Blocks: func() ([]v1.IPAMBlock, bool) {
			if a.syncer == nil {
				return nil, false
			}
			return a.syncer.Blocks()
		}})
	if a.felix, err = felix.New(felix.Config{
		NodeName: cfg.NodeName, UplinkInterface: uplinks, TunnelMTU: tunnelMTU(cfg.MTU),
		WorkloadGracePeriod: cfg.WorkloadGrace, ResyncInterval: cfg.ResyncInterval,
		WaitForInSync: true,
	}, felix.WithLogger(log), felix.WithRegistry(a.reg)); err != nil {
		return fmt.Errorf("start felix: %w", err)
	}
	if err := a.startBGP(); err != nil {
		return err
	}
	dm := syncer.NewMetrics(a.reg)
	// The Secrets in the namespace are BGP passwords: a node without BGP does not watch them.
	secrets := cfg.Namespace
	if a.bgp == nil {
		secrets = ""
	}
	a.syncer = syncer.New(c, syncer.Config{NodeName: cfg.NodeName, Namespace: secrets, OnUpdate: a.onUpdates, Logger: log.With("component", "syncer"), Metrics: dm})
	a.policy = syncer.NewPolicyWatcher(c, a.felix.OnUpdate, log.With("component", "policy"), dm)
	ipammetrics.Register(a.reg, ipammetrics.Lists{Pools: a.syncer.Pools, Blocks: a.syncer.Blocks})

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
	observe, err := a.serveObserve(restCfg)
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
	if a.bgp != nil {
		g.Go(func() error { return a.bgp.Run(gctx) })
	}
	g.Go(func() error { return a.syncer.Run(gctx) })
	g.Go(func() error { return a.policy.Run(gctx) })
	g.Go(func() error { return a.pods.Run(gctx) })
	g.Go(func() error { return a.runTunnelAddress(gctx) })
	g.Go(func() error { return a.runGC(gctx) })
	g.Go(func() error { return a.declareInSync(gctx) })
	if cfg.CNIKubeconfig != "" {
		g.Go(func() error { return a.refreshCNIKubeconfig(gctx) })
	}
	if cfg.LBIPAM {
		lbm := controller.NewMetrics(a.reg)
		g.Go(func() error { return a.runLBIPAM(gctx, lbm) })
	}
	if cfg.PolicyStatus {
		psm := policystatus.NewMetrics(a.reg)
		g.Go(func() error { return a.runPolicyStatus(gctx, psm) })
	}

	select {
	case <-ctx.Done():
	case <-gctx.Done():
	}
	log.Info("shutting down", "mode", cfg.Shutdown)
	stopFelix()
	<-felixDone
	shutdownErr := a.shutdown()
	ipamSrv.Stop() // waits for the IPAM calls in flight
	_ = health.Close()
	_ = metrics.Close()
	if observe != nil {
		_ = observe.Close()
	}
	stopRun()
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return shutdownErr
}

// startBGP makes the node's BGP agent, or with --bgp=none says so in the run directory, where
// `tabbyctl node status` looks for the agent's status socket.
func (a *Agent) startBGP() error {
	off := filepath.Join(a.cfg.RunDir, names.BGPOffFile)
	if !a.cfg.BGPEnabled() {
		a.log.Info("BGP off (--bgp=none): no BGP agent on this node; pools must use VXLAN to reach its pods")
		if err := os.MkdirAll(a.cfg.RunDir, 0o755); err != nil {
			return fmt.Errorf("run directory: %w", err)
		}
		if err := os.WriteFile(off, []byte("tabby-node runs with --bgp=none: no BGP agent on this node\n"), 0o644); err != nil {
			return fmt.Errorf("mark BGP off in the run directory: %w", err)
		}
		return nil
	}
	if err := os.Remove(off); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the BGP-off mark of an earlier run: %w", err)
	}
	b, err := bird.New(bird.Config{
		NodeName: a.cfg.NodeName, GoBGPAPI: a.cfg.GoBGPAPI,
		StatusSocket: filepath.Join(a.cfg.RunDir, "bird.sock"),
		// Learned routes go to felix, which picks the device; no session opens before every
		// node, pool and block has been seen.
		Routes:        a.felix.OnUpdate,
		WaitForInSync: true,
		Logger:        a.log.With("component", "bird"),
	})
	if err != nil {
		return fmt.Errorf("start bird: %w", err)
	}
	a.bgp = b
	a.reg.MustRegister(a.bgp.Collectors()...)
	return nil
}

func (c *Config) defaults() {
	if c.Shutdown == "" {
		c.Shutdown = "restart"
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
		return mtu - ipam.IPIPOverhead
	}
	return 0
}

func (a *Agent) waitForNode(ctx context.Context) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		n, err := a.client.Nodes().Get(ctx, a.cfg.NodeName)
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

// recordAddresses writes the detected addresses into the Node annotations felix and the other
// nodes' speakers read; a node without IPv6 loses a stale IPv6 annotation. A node without BGP
// says so, so that no other node's speaker opens a session to it. The same write records the
// version this agent runs and where it serves its observation endpoint.
func (a *Agent) recordAddresses(ctx context.Context, n *corev1.Node, addrs ipfamily.Pair[netip.Prefix]) error {
	want := map[string]*string{v1.AnnotationNoBGP: nil, v1.AnnotationVersion: ptr(version.Version), v1.AnnotationObserveAddress: nil}
	if addr := a.cfg.observeAdvertised(addrs); addr != "" {
		want[v1.AnnotationObserveAddress] = ptr(addr)
	}
	if !a.cfg.BGPEnabled() {
		want[v1.AnnotationNoBGP] = ptr("true")
	}
	for _, fam := range ipfamily.All {
		key := v1.AnnotationBGPIPv4Address
		if fam == ipfamily.IPv6 {
			key = v1.AnnotationBGPIPv6Address
		}
		want[key] = nil
		if addr := addrs.Get(fam); addr.IsValid() {
			want[key] = ptr(addr.String())
		}
	}
	patch := map[string]*string{}
	for k, v := range want {
		cur, has := n.Annotations[k]
		if v == nil && has || v != nil && (!has || cur != *v) {
			patch[k] = v
		}
	}
	if len(patch) == 0 {
		return nil
	}
	return a.patchAnnotations(ctx, patch)
}

// patchAnnotations sets (or, with a nil value, removes) annotations on this node's Node.
func (a *Agent) patchAnnotations(ctx context.Context, ann map[string]*string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	if _, err := a.client.Nodes().Patch(ctx, a.cfg.NodeName, types.MergePatchType, body); err != nil {
		return fmt.Errorf("annotate Node %s: %w", a.cfg.NodeName, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
