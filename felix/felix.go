// Package felix is tabby's dataplane agent: it makes the node's kernel (routes, tunl0, the VXLAN
// devices, sysctls, NAT outgoing, NetworkPolicy) match what the datastore and the BGP speaker
// say, and owns only what is tabby's. The layout follows Calico Felix.
//
// One input, OnUpdate (OnUpdates for a batch), takes apis/model's changes (nodes, pools, blocks,
// this node's workloads, the learned routes, the FelixConfiguration, InSync) and NetworkPolicy's
// own messages (messages.go); the loop (loop.go) hands each message, and the kernel's link and
// host-route events, to every Manager (the VXLAN devices' neighbour events to theirs), which
// records what concerns it and marks itself dirty. Then every manager's CompleteDeferredWork
// states what changed into the shared Writers, which felix applies once per pass for all
// managers: ipsets, iptables, stale ipsets, then routes.
//
// The managers, in the order they run: sysctl.Manager (forwarding, the cali interfaces'
// settings), tunnel.Manager (tunl0), vxlan.Manager (the VXLAN devices, their neighbour and FDB
// entries and the routes through them, from the datastore), localroutes (each pod's host route
// and the blackholes of this node's blocks), bgproutes (the routes BGP learned), nat
// (natOutgoing), the policy manager (policy_manager.go, over felix/policy's incremental
// State) and the flow log manager (flowlog_manager.go: felix/flowlog's capture while the
// FelixConfiguration enables flow logs; FlowLog serves what it records). The route table (felix/routetable) takes each route-producing manager's routes as a
// class of its own and programs, per prefix, the route of the class that wins; a manager added
// with AddManager writes into the same Writers, touching neither the syncer nor the other
// managers.
//
// Until model.InSync (Config.WaitForInSync) the writers add and replace but delete nothing. The
// route decisions are in felix/calc and the policy rendering in felix/policy; neither touches
// the kernel. The design: docs/architecture.md, "felix: the dataplane".
package felix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/bgproutes"
	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/felix/localroutes"
	"github.com/tabbynet/tabby/felix/metrics"
	"github.com/tabbynet/tabby/felix/netnsrun"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/felix/sysctl"
	"github.com/tabbynet/tabby/felix/tunnel"
	"github.com/tabbynet/tabby/felix/vxlan"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Defaults for Config's zero values.
const (
	DefaultWorkloadGracePeriod = 10 * time.Second
	DefaultResyncInterval      = 90 * time.Second
	writeRetryInterval         = time.Second
)

// Config configures felix.
type Config struct {
	// NodeName is this node: its NodeUpdate gives its addresses, and the blocks affine to it
	// are its own.
	NodeName string
	// UplinkInterface holds the node's BGP address of each family: next hops in its subnet are
	// reached on it. IPv6's "" is IPv4's; IPv4's is "" on an IPv6-only node.
	UplinkInterface ipfamily.Pair[string]
	// TunnelMTU for tunl0; 0 = uplink MTU - 20.
	TunnelMTU int
	// WorkloadGracePeriod protects a tabby route on a cali interface felix does not know yet.
	WorkloadGracePeriod time.Duration
	// ResyncInterval between full re-reads of the kernel.
	ResyncInterval time.Duration
	// IptablesBackend: "" detects (like kube-proxy), or "legacy" / "nft".
	IptablesBackend iptables.Backend
	// NetNSPath binds felix to a network namespace (tests, benchmarks); "" = the current one.
	NetNSPath string
	// VXLANChecksumOffload is the VXLAN devices' tx checksum offload: "" (auto: on, except on
	// a kernel older than 5.7), "on" or "off"; see vxlan.ChecksumOffload.
	VXLANChecksumOffload vxlan.ChecksumOffload
	// WaitForInSync makes felix remove nothing (routes, iptables chains and jumps, ipsets,
	// tunl0, VXLAN devices and entries) until the model.InSync message: what tabby-node uses, so a restart never cuts
	// traffic the kernel is still carrying. Rules and sets are added and updated meanwhile.
	WaitForInSync bool
}

// SysctlWriter writes kernel settings; *sysctl.Writer is the real one.
type SysctlWriter = sysctl.Setter

// Option injects a dependency.
type Option func(*Felix)

// WithNetlink replaces the netlink handle (a fake in unit tests). Felix does not close it.
func WithNetlink(h nl.Handle) Option { return func(f *Felix) { f.h = h } }

// WithCommandRunner runs iptables and ipset through r instead of the real commands in felix's
// namespace: unit tests pass a fakekernel.Kernel and look at what the writers ran.
func WithCommandRunner(r cmdrun.Runner) Option { return func(f *Felix) { f.cmd = r } }

// WithSysctl replaces the sysctl writer.
func WithSysctl(s SysctlWriter) Option { return func(f *Felix) { f.sysctl = s } }

// WithRegistry registers felix's metrics on reg.
func WithRegistry(reg *prometheus.Registry) Option { return func(f *Felix) { f.reg = reg } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(f *Felix) { f.log = l } }

// Felix is the agent. OnUpdate is safe to call from any goroutine; the managers are only ever
// touched by the loop (Run, ApplyNow), one pass at a time.
type Felix struct {
	cfg     Config
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	health  *metrics.Health

	h        nl.Handle
	ownsH    bool
	run      netnsrun.Runner
	closeRun func() error
	cmd      cmdrun.Runner
	sysctl   SysctlWriter

	// updates carries the messages (OnUpdate) to the loop.
	updates updateQueue
	kick    chan struct{}
	// changedAt: unix nanoseconds of the oldest input change no apply has taken yet (0: none),
	// for the apply's lag (tabby_felix_apply_lag_seconds).
	changedAt atomic.Int64

	dpMu   sync.Mutex // dataplane state, one pass at a time
	inSync bool
	rt     *routetable.RouteTable
	bgp    *bgproutes.Manager
	vxlan  *vxlan.Manager

	// The shared writers and the managers feeding them (see Manager), in the order they run.
	writers  Writers
	tables   []*iptables.Table // every table of Writers, in apply order
	managers []Manager
	// flows records flows while the FelixConfiguration enables flow logs; flowRules are the
	// rules the policy chains log, which the policy manager renders and the flow log reads.
	flows     *flowLogManager
	flowRules *flowRules
	// writeRetryAt: the last write of the iptables tables and ipsets failed; they are tried
	// again from then (zero = in line), not on every event before.
	writeRetryAt time.Time
}

// New validates cfg, opens the dataplane handles and builds the managers.
func New(cfg Config, opts ...Option) (*Felix, error) {
	if cfg.UplinkInterface.Get(ipfamily.IPv6) == "" {
		cfg.UplinkInterface.Set(ipfamily.IPv6, cfg.UplinkInterface.Get(ipfamily.IPv4))
	}
	if cfg.UplinkInterface == (ipfamily.Pair[string]{}) {
		return nil, errors.New("felix config: UplinkInterface is required (of one family at least)")
	}
	if cfg.TunnelMTU != 0 && (cfg.TunnelMTU < 576 || cfg.TunnelMTU > 65535) {
		return nil, fmt.Errorf("felix config: TunnelMTU %d is outside 576..65535 (0 = uplink MTU - 20)", cfg.TunnelMTU)
	}
	if cfg.WorkloadGracePeriod < 0 || cfg.ResyncInterval < 0 {
		return nil, fmt.Errorf("felix config: WorkloadGracePeriod %s and ResyncInterval %s must not be negative", cfg.WorkloadGracePeriod, cfg.ResyncInterval)
	}
	if !cfg.VXLANChecksumOffload.Valid() {
		return nil, fmt.Errorf("felix config: VXLANChecksumOffload %q: want \"\", %q or %q", cfg.VXLANChecksumOffload, vxlan.ChecksumOffloadOn, vxlan.ChecksumOffloadOff)
	}
	if !cfg.IptablesBackend.Valid() {
		return nil, fmt.Errorf("felix config: IptablesBackend %q: want \"\", %q or %q", cfg.IptablesBackend, iptables.BackendLegacy, iptables.BackendNFT)
	}
	if cfg.WorkloadGracePeriod == 0 {
		cfg.WorkloadGracePeriod = DefaultWorkloadGracePeriod
	}
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	f := &Felix{
		cfg: cfg, log: slog.Default(), kick: make(chan struct{}, 1),
		health: &metrics.Health{Stall: 3 * cfg.ResyncInterval},
		run:    netnsrun.Current, inSync: !cfg.WaitForInSync,
	}
	f.updates.kick = f.wake
	for _, o := range opts {
		o(f)
	}
	f.log = f.log.With("component", "felix", "node", cfg.NodeName)
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	if cfg.NetNSPath != "" {
		run, closeRun, err := netnsrun.At(cfg.NetNSPath)
		if err != nil {
			return nil, err
		}
		f.run, f.closeRun = run, closeRun
	}
	if f.h == nil {
		h, err := nl.NewReal(cfg.NetNSPath)
		if err != nil {
			return nil, err
		}
		f.h, f.ownsH = h, true
	}
	if f.sysctl == nil {
		f.sysctl = sysctl.NewWriter(f.run)
	}
	f.metrics = metrics.New(f.reg)
	f.flowRules = &flowRules{}
	f.rt = routetable.New(f.h, routetable.Options{
		Protocol: v1.RouteProtocol, GracePeriod: cfg.WorkloadGracePeriod,
		IsWorkloadInterface: names.IsHostVeth, Log: f.log,
	})
	f.rt.SetHoldDeletes(cfg.WaitForInSync)
	if err := f.newWriters(); err != nil {
		return nil, err
	}
	f.newManagers()
	ok = true
	return f, nil
}

// newManagers builds felix's own managers, each on its own concern, in the order they run:
// kernel settings, tunl0 and the VXLAN devices first, so the routes through them can be
// programmed in the same pass; then the routes; then what the iptables and ipset writers carry.
func (f *Felix) newManagers() {
	var sc *sysctl.Writer
	if w, isReal := f.sysctl.(*sysctl.Writer); isReal {
		sc = w
	}
	f.bgp = bgproutes.New(f.rt, bgproutes.Options{
		NodeName: f.cfg.NodeName, Uplink: f.cfg.UplinkInterface,
		Unresolved: f.metrics.UnresolvedNextHops, Log: f.log,
	})
	linkReady := func(l netlink.Link) {
		f.rt.OnLinkUpdate(netlink.LinkUpdate{Header: unix.NlMsghdr{Type: unix.RTM_NEWLINK}, Link: l})
	}
	f.vxlan = vxlan.New(f.rt, f.h, vxlan.Options{
		NodeName: f.cfg.NodeName, Uplink: f.cfg.UplinkInterface, WaitForInSync: f.cfg.WaitForInSync,
		ChecksumOffload: f.cfg.VXLANChecksumOffload, LinkReady: linkReady,
		Peers: f.metrics.VXLANPeers, Errors: f.metrics.VXLANErrors, NoRoutes: f.metrics.VXLANNoRoutes, Log: f.log,
	})
	f.managers = append([]Manager{
		sysctl.NewManager(f.sysctl, sysctl.ManagerOptions{IsWorkloadInterface: names.IsHostVeth, Errors: f.metrics.SysctlErrors}),
		tunnel.NewManager(tunnel.NewDevice(f.h, sc, f.log), tunnel.Options{
			NodeName: f.cfg.NodeName, MTU: f.cfg.TunnelMTU, Uplink: f.cfg.UplinkInterface.Get(ipfamily.IPv4),
			WaitForInSync: f.cfg.WaitForInSync, Errors: f.metrics.TunnelErrors, Log: f.log,
			LinkReady: linkReady,
		}),
		f.vxlan,
		localroutes.New(f.rt, f.cfg.NodeName, f.log),
		f.bgp,
	}, f.managers...)
}

// Close stops the flow log's capture and releases the netlink handles felix opened.
func (f *Felix) Close() {
	if f.flows != nil {
		f.flows.stop()
	}
	if f.ownsH && f.h != nil {
		f.h.Close()
	}
	if f.closeRun != nil {
		_ = f.closeRun()
	}
}

// wake makes the loop run a pass soon; a wake already pending covers this one.
func (f *Felix) wake() {
	f.changedAt.CompareAndSwap(0, time.Now().UnixNano())
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// HealthHandler serves /livez and /readyz.
func (f *Felix) HealthHandler() http.Handler { return f.health.Handler() }

// MetricsHandler serves felix's metrics registry.
func (f *Felix) MetricsHandler() http.Handler { return f.metrics.Handler() }

// Registry is the registry felix's collectors are on (to merge into another handler).
func (f *Felix) Registry() *prometheus.Registry { return f.metrics.Registry }

// Ready tells whether the first apply has succeeded.
func (f *Felix) Ready() bool { return f.health.Ready() }

// Unresolved returns the BGP routes whose next hop is currently unresolvable, with reasons.
func (f *Felix) Unresolved() map[netip.Prefix]string {
	f.dpMu.Lock()
	defer f.dpMu.Unlock()
	return f.bgp.Unresolved()
}

// VXLANUnresolved returns the VXLAN pools' prefixes on other nodes felix has no route for, with
// the reasons.
func (f *Felix) VXLANUnresolved() map[netip.Prefix]string {
	f.dpMu.Lock()
	defer f.dpMu.Unlock()
	return f.vxlan.NoRoutes()
}

// ApplyNow runs a pass synchronously: the messages queued so far, then the kernel.
func (f *Felix) ApplyNow(ctx context.Context) error {
	return f.apply(ctx)
}

// QueueResync makes the next pass re-read the kernel (routes, links, iptables, ipsets).
func (f *Felix) QueueResync() {
	f.dpMu.Lock()
	f.rt.QueueResync()
	f.dpMu.Unlock()
	f.wake()
}
