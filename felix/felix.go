// Package felix is tabby's dataplane agent: it makes the node's kernel (routes, tunl0, sysctls,
// NAT outgoing) match what the datastore and the BGP speaker say, and owns only what is
// tabby's. The layout follows Calico Felix: a pure calculation (calc) feeding managers
// (routetable, tunnel, sysctl diff against the kernel themselves; nat, a Manager, hands its
// state to the shared iptables and ipset writers, which felix applies once per pass).
package felix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/felix/metrics"
	"github.com/tabbynet/tabby/felix/nat"
	"github.com/tabbynet/tabby/felix/netnsrun"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/felix/sysctl"
	"github.com/tabbynet/tabby/felix/tunnel"
)

// Defaults for Config's zero values.
const (
	DefaultWorkloadGracePeriod = 10 * time.Second
	DefaultResyncInterval      = 90 * time.Second
	writeRetryInterval         = time.Second
)

// Config configures felix.
type Config struct {
	NodeName string
	// UplinkInterface holds the node's BGP address; same-subnet next hops are reached on it.
	// "" on an IPv6-only node.
	UplinkInterface string
	// UplinkInterface6 holds the node's IPv6 BGP address; "" = UplinkInterface.
	UplinkInterface6 string
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
	// WaitForInSync makes felix remove nothing (routes, iptables chains and jumps, ipsets,
	// tunl0) until SetInSync: what tabby-node uses, so a restart never cuts traffic the kernel
	// is still carrying. Rules and sets are added and updated meanwhile.
	WaitForInSync bool
}

// Pool, Workload and BGPRoute are felix's inputs; see calc for their meaning.
type (
	Pool     = calc.Pool
	Workload = calc.Workload
	BGPRoute = calc.BGPRoute
)

// SysctlWriter writes kernel settings; *sysctl.Writer is the real one.
type SysctlWriter interface {
	Set(settings ...sysctl.Setting) error
}

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

// Felix is the agent. Setters record desired state and wake the loop; they are safe to call
// from any goroutine.
type Felix struct {
	cfg     Config
	inSync  atomic.Bool
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

	mu sync.Mutex // inputs
	in calc.Input
	// A pod coming or going changes only workload routes, and a BGP route only its prefix's
	// (bgpDirty), which felix updates one by one; anything else (pools, blocks, the node)
	// recomputes every route and re-applies the tunnel and NAT.
	workloadsChanged, otherChanged bool
	// workloadsInUse: apply is reading in.Workloads, so SetWorkloads must not overwrite it in
	// place (it reuses the slice otherwise: a node's pod list is copied on every pod change).
	workloadsInUse bool
	// bgpDirty: the BGP prefixes learned, replaced or withdrawn since the last snapshot;
	// bgpSnap is apply's copy of the BGP routes, brought up to date prefix by prefix.
	bgpDirty map[netip.Prefix]struct{}
	bgpSnap  map[netip.Prefix]netip.Addr
	kick     chan struct{}
	// changedAt: unix nanoseconds of the oldest input change no apply has taken yet (0: none),
	// for the apply's lag (tabby_felix_apply_lag_seconds).
	changedAt atomic.Int64
	// updates carries the managers' messages (OnUpdate) to the loop.
	updates updateQueue

	dpMu          sync.Mutex // dataplane state, one apply at a time
	rt            *routetable.RouteTable
	tun           *tunnel.Manager
	last          *calc.Result
	spare         map[netip.Prefix]calc.Route // the route map the table no longer holds
	unresolved    map[netip.Prefix]string
	sysctlDone    map[string]int
	forwarding6   bool // IPv6 forwarding is on: an IPv6 pool asked for it
	pendingIfaces map[string]int
	tunnelDirty   bool
	tunnelApplied *tunnel.Desired // what tunl0 was last brought to; nil: apply it again
	tunnelErr     string

	// The shared writers and the managers feeding them (see Manager).
	writers  Writers
	tables   []*iptables.Table // every table of Writers, in apply order
	managers []Manager
	// writeRetryAt: the last write failed; the writers are tried again from then (zero = in
	// line), not on every event before.
	writeRetryAt time.Time

	// wlIndex indexes the workloads of the last apply; wlSpare is the previous one, reused to
	// index the next list without allocating a map of every pod for each new pod.
	wlIndex, wlSpare calc.WorkloadIndex
}

// New validates cfg and opens the dataplane handles.
func New(cfg Config, opts ...Option) (*Felix, error) {
	if cfg.UplinkInterface == "" && cfg.UplinkInterface6 == "" {
		// An IPv6-only node has only the IPv6 one.
		return nil, errors.New("felix config: UplinkInterface or UplinkInterface6 is required")
	}
	if cfg.TunnelMTU != 0 && (cfg.TunnelMTU < 576 || cfg.TunnelMTU > 65535) {
		return nil, fmt.Errorf("felix config: TunnelMTU %d is outside 576..65535 (0 = uplink MTU - 20)", cfg.TunnelMTU)
	}
	if cfg.WorkloadGracePeriod < 0 || cfg.ResyncInterval < 0 {
		return nil, fmt.Errorf("felix config: WorkloadGracePeriod %s and ResyncInterval %s must not be negative", cfg.WorkloadGracePeriod, cfg.ResyncInterval)
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
		health:     &metrics.Health{Stall: 3 * cfg.ResyncInterval},
		unresolved: map[netip.Prefix]string{}, sysctlDone: map[string]int{}, pendingIfaces: map[string]int{},
		tunnelDirty: true, run: netnsrun.Current,
	}
	f.updates.kick = f.wake
	f.in.UplinkInterface, f.in.UplinkInterface6 = cfg.UplinkInterface, cfg.UplinkInterface6
	f.in.BGPRoutes, f.bgpDirty = map[netip.Prefix]netip.Addr{}, map[netip.Prefix]struct{}{}
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
	if err := f.newWriters(); err != nil {
		return nil, err
	}
	f.metrics = metrics.New(f.reg)
	f.rt = routetable.New(f.h, routetable.Options{
		Protocol: v1.RouteProtocol, GracePeriod: cfg.WorkloadGracePeriod,
		IsWorkloadInterface: names.IsHostVeth, Log: f.log,
	})
	f.rt.SetHoldDeletes(cfg.WaitForInSync)
	f.inSync.Store(!cfg.WaitForInSync)
	var sc *sysctl.Writer
	if w, isReal := f.sysctl.(*sysctl.Writer); isReal {
		sc = w
	}
	f.tun = tunnel.New(f.h, sc, f.log)
	ok = true
	return f, nil
}

// Close releases the netlink handles felix opened.
func (f *Felix) Close() {
	if f.ownsH && f.h != nil {
		f.h.Close()
	}
	if f.closeRun != nil {
		_ = f.closeRun()
	}
}

// changed records what changed and wakes the loop; f.mu must be held.
func (f *Felix) changed(workloads bool) {
	if workloads {
		f.workloadsChanged = true
	} else {
		f.otherChanged = true
	}
	f.wake()
}

// wake makes the loop run an apply soon; a wake already pending covers this one.
func (f *Felix) wake() {
	f.changedAt.CompareAndSwap(0, time.Now().UnixNano())
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// SetLocalNode sets the node's BGP address with its subnet (198.51.100.11/24) and its tunnel
// address (invalid when none).
func (f *Felix) SetLocalNode(bgpAddr netip.Prefix, tunnelAddr netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.in.NodeAddr == bgpAddr && f.in.TunnelAddr == tunnelAddr {
		return
	}
	f.in.NodeAddr, f.in.TunnelAddr = bgpAddr, tunnelAddr
	f.changed(false)
}

// SetLocalNode6 sets the node's IPv6 BGP address with its subnet (2001:db8:100::11/64), invalid
// when the node has none: IPv6 next hops in that subnet are reached on the uplink.
func (f *Felix) SetLocalNode6(bgpAddr netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.in.NodeAddr6 == bgpAddr {
		return
	}
	f.in.NodeAddr6 = bgpAddr
	f.changed(false)
}

// The setters below compare before they mark anything changed: tabby-node hands felix its whole
// snapshot on every datastore event, and an unchanged pool, block or node must not turn a new
// pod's one route into a recompute of every route (the per-workload path). Order carries no
// meaning in these lists, so they are kept sorted.

// SetPools sets every IPPool.
func (f *Felix) SetPools(pools []Pool) {
	pools = slices.Clone(pools)
	slices.SortFunc(pools, func(a, b Pool) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.CIDR.Addr().Compare(b.CIDR.Addr())
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Equal(f.in.Pools, pools) {
		return
	}
	f.in.Pools = pools
	f.changed(false)
}

// SetLocalBlocks sets the blocks affine to this node.
func (f *Felix) SetLocalBlocks(blocks []netip.Prefix) {
	blocks = slices.Clone(blocks)
	slices.SortFunc(blocks, comparePrefix)
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Equal(f.in.LocalBlocks, blocks) {
		return
	}
	f.in.LocalBlocks = blocks
	f.changed(false)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// SetWorkloads sets the full set of this node's workloads.
func (f *Felix) SetWorkloads(w []Workload) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Equal(f.in.Workloads, w) {
		return
	}
	if f.workloadsInUse {
		f.in.Workloads = slices.Clone(w)
	} else {
		f.in.Workloads = append(f.in.Workloads[:0], w...)
	}
	f.changed(true)
}

// UpsertBGPRoute records a route learned from BGP.
func (f *Felix) UpsertBGPRoute(r BGPRoute) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := r.Prefix.Masked()
	if old, ok := f.in.BGPRoutes[p]; ok && old == r.NextHop {
		return
	}
	f.in.BGPRoutes[p] = r.NextHop
	f.bgpDirty[p] = struct{}{}
	f.wake()
}

// DeleteBGPRoute forgets a withdrawn route.
func (f *Felix) DeleteBGPRoute(prefix netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := prefix.Masked()
	if _, ok := f.in.BGPRoutes[p]; !ok {
		return
	}
	delete(f.in.BGPRoutes, p)
	f.bgpDirty[p] = struct{}{}
	f.wake()
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
	return maps.Clone(f.unresolved)
}

// ApplyNow applies the dataplane synchronously.
func (f *Felix) ApplyNow(ctx context.Context) error {
	return f.apply(ctx)
}

// QueueResync makes the next apply re-read the kernel (routes, links, iptables, ipsets).
func (f *Felix) QueueResync() {
	f.dpMu.Lock()
	f.rt.QueueResync()
	f.dpMu.Unlock()
	f.wake()
}

// snapshot returns the inputs and what changed since the last one. in.Workloads is only set
// when they changed (or wantWorkloads), and then stays apply's until releaseWorkloads.
// in.BGPRoutes is apply's own copy, valid until the next snapshot.
func (f *Felix) snapshot(wantWorkloads bool) (in calc.Input, workloadsChanged, otherChanged bool, bgpChanged []netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in = f.in
	workloadsChanged, otherChanged = f.workloadsChanged || wantWorkloads, f.otherChanged
	if workloadsChanged {
		f.workloadsInUse = true
	} else {
		in.Workloads = nil
	}
	// The setters replace slices rather than mutate them (SetWorkloads reuses its slice only
	// while apply is not reading it); the BGP map needs a copy, kept up to date with the
	// prefixes that changed: neither a new pod nor a BGP route pays for copying every route.
	if f.bgpSnap == nil {
		f.bgpSnap = maps.Clone(f.in.BGPRoutes)
	} else {
		for p := range f.bgpDirty {
			if nh, ok := f.in.BGPRoutes[p]; ok {
				f.bgpSnap[p] = nh
			} else {
				delete(f.bgpSnap, p)
			}
			bgpChanged = append(bgpChanged, p)
		}
	}
	clear(f.bgpDirty)
	in.BGPRoutes = f.bgpSnap
	f.workloadsChanged, f.otherChanged = false, false
	return in, workloadsChanged, otherChanged, bgpChanged
}

func (f *Felix) releaseWorkloads() {
	f.mu.Lock()
	f.workloadsInUse = false
	f.mu.Unlock()
}

func (f *Felix) onRoute(u netlink.RouteUpdate) {
	f.rt.OnRouteUpdate(u)
}

func (f *Felix) onLink(u netlink.LinkUpdate) {
	f.rt.OnLinkUpdate(u)
	name := u.Link.Attrs().Name
	switch {
	case name == calc.TunnelDevice || name != "" && name == f.cfg.UplinkInterface:
		f.tunnelDirty = true
	case names.IsHostVeth(name) && u.Header.Type == unix.RTM_NEWLINK:
		if f.sysctlDone[name] != u.Link.Attrs().Index {
			f.pendingIfaces[name] = u.Link.Attrs().Index
		}
	case u.Header.Type == unix.RTM_DELLINK:
		delete(f.sysctlDone, name)
	}
}

// apply is one pass: re-read the kernel if due, recompute what inputs or host routes changed,
// then bring sysctls, tunl0, iptables and ipsets (NAT) and routes in line.
func (f *Felix) apply(ctx context.Context) error {
	f.dpMu.Lock()
	defer f.dpMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	resync := f.rt.ResyncQueued()
	if err := f.rt.Sync(); err != nil {
		f.metrics.NetlinkErrors.Inc()
		return fmt.Errorf("read kernel state: %w", err)
	}
	if resync {
		for name, idx := range f.rt.Links() {
			if names.IsHostVeth(name) {
				f.pendingIfaces[name] = idx
			}
		}
	}
	// Taken before the inputs are: a change after it is this apply's or the next one's, and
	// counts from its own time in the next.
	if since := f.changedAt.Swap(0); since != 0 {
		defer func() { f.metrics.ApplyLag.Observe(time.Since(time.Unix(0, since)).Seconds()) }()
	}
	in, workloadsChanged, otherChanged, bgpChanged := f.snapshot(f.wlIndex == nil)
	f.updateRoutes(in, workloadsChanged, otherChanged, bgpChanged)
	for _, msg := range f.updates.take() {
		for _, m := range f.managers {
			m.OnUpdate(msg)
		}
	}
	if resync || otherChanged {
		// Pools change only with otherChanged; a manager ignores a message that changes
		// nothing, so a pod coming or going costs NAT no command.
		msg := nat.Pools{Masq: f.last.MasqPools, All: f.last.AllPools}
		for _, m := range f.managers {
			m.OnUpdate(msg)
		}
	}
	var errs []error
	errs = append(errs, f.applySysctls(resync)...)
	// Until the datastore and BGP are in sync the writers add and replace but take nothing
	// away (deletions are held, see SetInSync).
	if err := f.applyWriters(ctx, resync, start); err != nil {
		errs = append(errs, fmt.Errorf("iptables and ipsets: %w", err))
	}
	if !f.inSync.Load() {
		// Nor is tunl0 touched, nor a route removed (see routetable.SetHoldDeletes).
		res, err := f.rt.Apply()
		f.metrics.NetlinkErrors.Add(float64(res.NetlinkErrors))
		return errors.Join(append(errs, err)...)
	}
	if err := f.applyTunnel(in, resync); err != nil {
		errs = append(errs, err)
	}
	res, err := f.rt.Apply()
	f.metrics.NetlinkErrors.Add(float64(res.NetlinkErrors))
	for _, k := range calc.Kinds {
		f.metrics.RoutesProgrammed.WithLabelValues(k.String()).Set(float64(res.Programmed[k]))
	}
	f.metrics.RouteFailures.Set(float64(len(res.Failed)))
	if err != nil {
		for _, e := range res.Failed {
			f.log.Warn("route not programmed", "route", e.Route, "error", e.Err)
		}
		errs = append(errs, err)
	}
	elapsed := time.Since(start)
	f.metrics.ApplyDuration.Observe(elapsed.Seconds())
	if resync {
		f.metrics.ResyncDuration.Observe(elapsed.Seconds())
	}
	f.health.SetReady()
	if len(errs) == 0 {
		f.metrics.LastApply.Set(float64(time.Now().UnixNano()) / 1e9)
	}
	return errors.Join(errs...)
}

// updateRoutes hands the route table what changed: when only pods and BGP routes changed, just
// the routes of the pods that came, went or moved (calc.WorkloadChanges) and of the BGP prefixes
// learned or withdrawn (calc.BGPRouteChanges), otherwise a full recompute. The full path is
// the reference; the incremental ones are proven equal to it in calc's tests.
func (f *Felix) updateRoutes(in calc.Input, workloadsChanged, otherChanged bool, bgpChanged []netip.Prefix) {
	old := f.wlIndex
	if workloadsChanged {
		idx, problems := calc.IndexWorkloads(in.Workloads, f.wlSpare)
		f.releaseWorkloads()
		in.Workloads = nil
		for _, p := range problems {
			f.log.Warn("workload skipped", "problem", p)
		}
		f.wlIndex, f.wlSpare = idx, old
	}
	in.WorkloadIndex = f.wlIndex
	full := f.rt.HostRoutesChanged() || otherChanged || f.last == nil
	if !full && workloadsChanged {
		changes, ok := calc.WorkloadChanges(in, old, f.wlIndex)
		if ok {
			for _, c := range changes {
				f.setRoute(c)
			}
		} else {
			full = true
		}
	}
	if !full && len(bgpChanged) > 0 {
		in.HostRoutes = f.rt.HostRoutes()
		for _, c := range calc.BGPRouteChanges(in, bgpChanged) {
			if !c.Keep {
				f.setRoute(c.Change)
			}
			f.reportUnresolvedOne(c.Dst, c.Unresolved)
		}
		f.metrics.UnresolvedNextHops.Set(float64(len(f.unresolved)))
	}
	if !full {
		return
	}
	in.HostRoutes = f.rt.HostRoutes()
	res := calc.ComputeInto(in, f.spare)
	for _, p := range res.Problems {
		f.log.Warn("input skipped", "problem", p)
	}
	f.reportUnresolved(res.Unresolved)
	f.rt.SetRoutes(res.Routes)
	if f.last != nil {
		f.spare = f.last.Routes
	}
	f.last = &res
}

func (f *Felix) setRoute(c calc.Change) {
	if c.Remove {
		f.rt.RemoveRoute(c.Dst)
	} else {
		f.rt.SetRoute(c.Dst, c.Route)
	}
}

// reportUnresolvedOne records whether prefix is unresolved now (u nil: it is not), and logs a
// change.
func (f *Felix) reportUnresolvedOne(prefix netip.Prefix, u *calc.Unresolved) {
	was, had := f.unresolved[prefix]
	if u == nil {
		if had {
			delete(f.unresolved, prefix)
			f.log.Info("BGP route next hop resolved or withdrawn", "prefix", prefix)
		}
		return
	}
	reason := unresolvedReason(*u)
	if was != reason {
		f.log.Warn("BGP route not programmed: next hop unresolved", "prefix", prefix, "nextHop", u.NextHop, "reason", u.Reason)
	}
	f.unresolved[prefix] = reason
}

func unresolvedReason(u calc.Unresolved) string {
	return fmt.Sprintf("next hop %s: %s", u.NextHop, u.Reason)
}

// reportUnresolved records the full list of a recompute: every prefix in it, and every prefix
// no longer in it resolved.
func (f *Felix) reportUnresolved(list []calc.Unresolved) {
	now := make(map[netip.Prefix]bool, len(list))
	for i := range list {
		now[list[i].Prefix] = true
		f.reportUnresolvedOne(list[i].Prefix, &list[i])
	}
	for p := range f.unresolved {
		if !now[p] {
			f.reportUnresolvedOne(p, nil)
		}
	}
	f.metrics.UnresolvedNextHops.Set(float64(len(f.unresolved)))
}

func (f *Felix) applySysctls(resync bool) []error {
	var errs []error
	if resync {
		if err := f.sysctl.Set(sysctl.Forwarding()...); err != nil {
			f.metrics.SysctlErrors.Inc()
			errs = append(errs, err)
		}
	}
	// IPv6 forwarding only once an IPv6 pool exists, as Calico does with IPv6 off: turning it
	// on makes the kernel ignore router advertisements on interfaces that only accept them
	// when not forwarding, which an IPv4-only node may rely on.
	if need := hasIPv6(f.last.AllPools); need && (resync || !f.forwarding6) {
		if err := f.sysctl.Set(sysctl.Forwarding6()...); err != nil {
			f.metrics.SysctlErrors.Inc()
			errs = append(errs, err)
		} else {
			f.forwarding6 = true
		}
	}
	for name, idx := range f.pendingIfaces {
		if err := f.sysctl.Set(sysctl.WorkloadInterface(name)...); err != nil {
			// The veth may be gone already; a persistent failure is retried at the next resync.
			f.metrics.SysctlErrors.Inc()
			errs = append(errs, err)
		} else {
			f.sysctlDone[name] = idx
		}
		delete(f.pendingIfaces, name)
	}
	return errs
}

func hasIPv6(pools []netip.Prefix) bool {
	return slices.ContainsFunc(pools, func(p netip.Prefix) bool { return p.Addr().Is6() })
}

// applyTunnel brings tunl0 in line when what it should be changed, a link event touched it or
// its uplink (tunnelDirty), or the kernel was re-read: a BGP route coming or going changes
// nothing of it, and skipping its netlink reads saved a third of felix's apply in a 20-node mesh.
func (f *Felix) applyTunnel(in calc.Input, resync bool) error {
	want := tunnel.Desired{Needed: f.last.TunnelNeeded, Addr: in.TunnelAddr, MTU: f.cfg.TunnelMTU, Uplink: f.cfg.UplinkInterface}
	if !resync && !f.tunnelDirty && f.tunnelApplied != nil && *f.tunnelApplied == want {
		return nil
	}
	f.tunnelApplied = nil
	link, err := f.tun.Apply(want)
	if link != nil {
		f.rt.OnLinkUpdate(netlink.LinkUpdate{Header: unix.NlMsghdr{Type: unix.RTM_NEWLINK}, Link: link})
	}
	f.tunnelDirty = err != nil
	if err != nil {
		f.metrics.TunnelErrors.Inc()
		if msg := err.Error(); msg != f.tunnelErr {
			f.log.Error("tunnel device not usable: IPIP routes stay unprogrammed", "device", calc.TunnelDevice, "error", err)
			f.tunnelErr = msg
		}
		return err
	}
	f.tunnelErr = ""
	f.tunnelApplied = &want
	return nil
}

// SetInSync tells felix that its inputs are complete (the datastore has synced and BGP has
// re-learned its routes). With Config.WaitForInSync, felix removes nothing before that.
func (f *Felix) SetInSync() {
	if f.inSync.Swap(true) {
		return
	}
	f.dpMu.Lock()
	f.rt.SetHoldDeletes(false)
	f.holdDeletes(false)
	f.tunnelDirty = true
	f.dpMu.Unlock()
	f.log.Info("in sync: stale routes, NAT rules and tunnel state may now be removed")
	f.mu.Lock()
	f.changed(false) // tunl0 and the writers are applied again, now with removals
	f.mu.Unlock()
}

// Run is the event loop: netlink subscriptions, input changes, timed work (grace periods,
// retries) and the periodic resync. It returns when ctx ends.
func (f *Felix) Run(ctx context.Context) error {
	for {
		err := f.runSubscribed(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, errSubscriptionBroken) {
			return err
		}
		f.log.Warn("netlink subscription broke (events lost): resubscribing and resyncing", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var errSubscriptionBroken = errors.New("netlink subscription broken")

func (f *Felix) runSubscribed(ctx context.Context) error {
	done := make(chan struct{})
	defer close(done)
	// Bursts queue in the subscription's 16 MB socket buffer, which costs the kernel's memory,
	// not ours: a channel of 2^16 updates would keep ~24 MB resident once a burst has touched
	// it. An overflow of both is a broken subscription: resubscribe and resync.
	routes := make(chan netlink.RouteUpdate, 1<<10)
	links := make(chan netlink.LinkUpdate, 1<<10)
	subErr := make(chan error, 1)
	err := f.h.Subscribe(done, routes, links, func(err error) {
		select {
		case subErr <- err:
		default:
		}
	})
	if err != nil {
		return err
	}
	// Whatever happened before the subscription is only visible by reading the kernel.
	f.QueueResync()

	ticker := time.NewTicker(f.cfg.ResyncInterval)
	defer ticker.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		f.health.Beat(time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-f.kick:
		case <-ticker.C:
			f.dpMu.Lock()
			f.rt.QueueResync()
			f.dpMu.Unlock()
		case <-timer.C:
		case err := <-subErr:
			return fmt.Errorf("%w: %v", errSubscriptionBroken, err)
		case u, ok := <-routes:
			if !ok {
				return errSubscriptionBroken
			}
			f.dpMu.Lock()
			f.onRoute(u)
			f.dpMu.Unlock()
		case u, ok := <-links:
			if !ok {
				return errSubscriptionBroken
			}
			f.dpMu.Lock()
			f.onLink(u)
			f.dpMu.Unlock()
		}
		if err := f.drain(routes, links); err != nil {
			return err
		}
		if err := f.apply(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("dataplane apply incomplete", "error", err)
		}
		f.dpMu.Lock()
		next := f.rt.NextDeadline()
		if !f.writeRetryAt.IsZero() && (next.IsZero() || f.writeRetryAt.Before(next)) {
			next = f.writeRetryAt
		}
		f.dpMu.Unlock()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
	}
}

// drain takes every event already queued, so one apply covers a burst.
func (f *Felix) drain(routes <-chan netlink.RouteUpdate, links <-chan netlink.LinkUpdate) error {
	f.dpMu.Lock()
	defer f.dpMu.Unlock()
	for {
		select {
		case u, ok := <-routes:
			if !ok {
				return errSubscriptionBroken
			}
			f.onRoute(u)
		case u, ok := <-links:
			if !ok {
				return errSubscriptionBroken
			}
			f.onLink(u)
		default:
			return nil
		}
	}
}
