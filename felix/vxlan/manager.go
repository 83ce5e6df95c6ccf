// Package vxlan is felix's VXLAN manager: per family with a VXLAN pool, the device (vxlan.tabby,
// vxlan-v6.tabby) with this node's VTEP, a permanent neighbour and FDB entry per other node's
// VTEP, and the routes to the other nodes' blocks and borrowed addresses of the VXLAN pools, via
// their VTEPs on the device or, for a CrossSubnet pool, natively to a node in this node's
// subnet. Everything comes from the datastore (the model's nodes, pools, blocks and the
// FelixConfiguration); nothing is learned. The decisions are felix/calc's (vxlan.go); the
// routes go through the route table as routetable.ClassVXLAN; the devices and the neighbour
// and FDB entries, which no shared writer holds, are made to match the kernel here, like the
// routes: from empty, after drift (netlink events, resyncs), and not at all when nothing
// changed. tabby owns its devices and every permanent entry on them, nothing else.
package vxlan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/internal/dirtyset"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// retryInterval is when a failed device or entry is tried again without anything else
// happening.
const retryInterval = time.Second

// Options configure the manager.
type Options struct {
	// NodeName is this node: its NodeUpdate carries its VTEPs and underlay addresses.
	NodeName string
	// Uplink holds the node's underlay address of each family: a CrossSubnet pool's routes to
	// nodes in its subnet leave by it, and the devices' MTU derives from its.
	Uplink ipfamily.Pair[string]
	// WaitForInSync removes nothing (devices, entries, addresses) until model.InSync, and does
	// not make a device again to change its VNI, port or local address before then.
	WaitForInSync bool
	// ChecksumOffload of the devices, decided for KernelRelease (uname -r; "": this kernel's).
	ChecksumOffload ChecksumOffload
	KernelRelease   string
	// LinkReady, when set, is told a device after each apply: the route table learns its index
	// at once and programs the routes through it in the same pass.
	LinkReady func(netlink.Link)
	// Peers (by family), Errors and NoRoutes, when set, are kept at the peers programmed, the
	// failed applies and the VXLAN pools' prefixes without a route.
	Peers    *prometheus.GaugeVec
	Errors   prometheus.Counter
	NoRoutes prometheus.Gauge
	Now      func() time.Time
	Log      *slog.Logger
}

// config is what the FelixConfiguration says of VXLAN, defaults applied.
type config struct {
	vni, port int
	mtu       ipfamily.Pair[int] // 0: the uplink's minus the overhead
}

func configOf(c *v1.FelixConfiguration) config {
	out := config{vni: v1.DefaultVXLANVNI, port: v1.DefaultVXLANPort}
	if c == nil {
		return out
	}
	s := c.Spec
	if s.VXLANVNI != nil {
		out.vni = *s.VXLANVNI
	}
	if s.VXLANPort != nil {
		out.port = *s.VXLANPort
	}
	if s.VXLANMTU != nil {
		out.mtu.Set(ipfamily.IPv4, *s.VXLANMTU)
	}
	if s.VXLANMTUV6 != nil {
		out.mtu.Set(ipfamily.IPv6, *s.VXLANMTUV6)
	}
	return out
}

// poolKey is what of a pool decides the VXLAN routes.
type poolKey struct {
	cidr netip.Prefix
	mode v1.VXLANMode
}

// device is one family's device and its peers' entries.
type device struct {
	fam     ipfamily.Family
	table   *peerTable
	wanted  bool
	dirty   bool
	applied *DeviceSpec // what it was last brought to; nil: apply again
	failed  bool
	lastErr string
	held    string
}

// Manager is felix's VXLAN manager. It takes the model's NodeUpdate/NodeRemove (every node's
// VTEPs and underlay addresses), PoolUpdate/PoolRemove, BlockUpdate/BlockRemove (every block's
// node and borrowed addresses), FelixConfigurationUpdate and InSync, felix's link events
// (routetable.LinkUpdate, LinksResync) and the kernel's neighbour events (OnNeighUpdate). A
// block's change costs its own prefixes, a node's the prefixes routed to it and its entries;
// what every route depends on (the pools, this node) decides them all again.
type Manager struct {
	rt      routetable.Writer
	dev     *Device
	opts    Options
	offload bool

	inSync   bool
	cfg      config
	underlay calc.Underlay
	local    ipfamily.Pair[calc.VTEP]
	localOK  ipfamily.Pair[bool]

	pools      map[string]model.Pool
	poolKeys   map[string]poolKey
	sorted     calc.Pools
	vxlanPools ipfamily.Pair[int]

	// nodes are the other nodes' underlay addresses, by name: a node is known once a
	// NodeUpdate told of it.
	nodes  map[string]ipfamily.Pair[netip.Addr]
	blocks map[netip.Prefix]model.Block
	// claims are the nodes each prefix is asked to be routed to, best first
	// (calc.CompareClaims); byNode counts the claims of each node to each prefix.
	claims map[netip.Prefix][]calc.Claim
	byNode map[string]map[netip.Prefix]int
	peers  ipfamily.Pair[*peerIndex]
	devs   ipfamily.Pair[*device]

	routes  map[netip.Prefix]calc.Route // stated in the route table
	noRoute map[netip.Prefix]calc.NoRoute
	dirty   dirtyset.Set[netip.Prefix]
	all     bool
	retryAt time.Time
}

// New returns a manager writing routes into rt and devices and entries through h.
func New(rt routetable.Writer, h nl.Handle, o Options) *Manager {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.KernelRelease == "" {
		o.KernelRelease = kernelRelease()
	}
	m := &Manager{
		rt: rt, dev: NewDevice(h, o.Log), opts: o, offload: o.ChecksumOffload.Wanted(o.KernelRelease),
		inSync: !o.WaitForInSync, cfg: configOf(nil), underlay: calc.Underlay{Uplink: o.Uplink},
		pools: map[string]model.Pool{}, poolKeys: map[string]poolKey{},
		nodes: map[string]ipfamily.Pair[netip.Addr]{}, blocks: map[netip.Prefix]model.Block{},
		claims: map[netip.Prefix][]calc.Claim{}, byNode: map[string]map[netip.Prefix]int{},
		routes: map[netip.Prefix]calc.Route{}, noRoute: map[netip.Prefix]calc.NoRoute{},
	}
	for _, fam := range ipfamily.All {
		m.peers.Set(fam, newPeerIndex())
		m.devs.Set(fam, &device{fam: fam, table: newPeerTable(h, fam), dirty: true})
	}
	return m
}

// OnUpdate records what VXLAN depends on; other messages are ignored.
func (m *Manager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case model.NodeUpdate:
		if u.Node.Name == m.opts.NodeName {
			m.setLocal(u.Node)
		} else {
			m.setNode(u.Node.Name, &u.Node)
		}
	case model.NodeRemove:
		if u.Name == m.opts.NodeName {
			m.setLocal(model.Node{Name: u.Name})
		} else {
			m.setNode(u.Name, nil)
		}
	case model.PoolUpdate:
		m.setPool(u.Pool.Name, &u.Pool)
	case model.PoolRemove:
		m.setPool(u.Name, nil)
	case model.BlockUpdate:
		m.setBlock(u.Block.CIDR, &u.Block)
	case model.BlockRemove:
		m.setBlock(u.CIDR, nil)
	case model.FelixConfigurationUpdate:
		if c := configOf(u.Config); c != m.cfg {
			m.cfg = c
			m.markDevices()
		}
	case routetable.LinkUpdate:
		for _, fam := range ipfamily.All {
			d := m.devs.Get(fam)
			if u.Name == calc.VXLANDevice(fam) || u.Name != "" && u.Name == m.opts.Uplink.Get(fam) && m.cfg.mtu.Get(fam) == 0 {
				d.dirty = true
			}
		}
	case routetable.LinksResync:
		m.markDevices()
	case model.InSync:
		if !m.inSync {
			m.inSync = true
			m.markDevices()
			for _, fam := range ipfamily.All {
				if t := m.devs.Get(fam).table; t.index != 0 {
					t.resync = true // entries that were not tabby's to remove may be now
				}
			}
		}
	}
}

func (m *Manager) markDevices() {
	for _, fam := range ipfamily.All {
		m.devs.Get(fam).dirty = true
	}
}

// OnNeighUpdate keeps the devices' entry caches current; it tells whether the change needs a
// write (a pass).
func (m *Manager) OnNeighUpdate(u netlink.NeighUpdate) bool {
	for _, fam := range ipfamily.All {
		if m.devs.Get(fam).table.onEvent(u) {
			return true
		}
	}
	return false
}

func (m *Manager) setLocal(n model.Node) {
	changed := n.BGPAddress != m.underlay.Addr
	m.underlay.Addr = n.BGPAddress
	for _, fam := range ipfamily.All {
		v, ok := calc.NodeVTEP(n, fam)
		if v == m.local.Get(fam) && ok == m.localOK.Get(fam) {
			continue
		}
		m.local.Set(fam, v)
		m.localOK.Set(fam, ok)
		m.peers.Get(fam).all()
		changed = true
	}
	if changed {
		m.all = true
		m.markDevices()
	}
}

func (m *Manager) setNode(name string, n *model.Node) {
	old, had := m.nodes[name]
	if n == nil {
		if !had {
			return
		}
		delete(m.nodes, name)
		for _, fam := range ipfamily.All {
			m.peers.Get(fam).set(name, calc.VTEP{}, false)
		}
		m.markNode(name)
		return
	}
	var ul ipfamily.Pair[netip.Addr]
	for _, fam := range ipfamily.All {
		ul.Set(fam, n.BGPAddress.Get(fam).Addr())
		v, ok := calc.NodeVTEP(*n, fam)
		m.peers.Get(fam).set(name, v, ok)
	}
	m.nodes[name] = ul
	if !had || old != ul {
		m.markNode(name)
	}
}

func (m *Manager) markNode(name string) {
	for p := range m.byNode[name] {
		m.dirty.Add(p)
	}
}

func (m *Manager) setPool(name string, p *model.Pool) {
	old, had := m.poolKeys[name]
	if p == nil {
		if !had {
			return
		}
		delete(m.pools, name)
		delete(m.poolKeys, name)
	} else {
		k := poolKey{cidr: p.CIDR, mode: p.VXLANMode}
		if had && old == k {
			return
		}
		m.pools[name], m.poolKeys[name] = *p, k
	}
	// Pools whose CIDR is not a prefix are reported by the BGP routes' manager.
	m.sorted, _ = calc.NewPools(slices.Collect(maps.Values(m.pools)))
	var n ipfamily.Pair[int]
	for _, p := range m.sorted {
		if p.VXLAN() {
			n.Set(p.Family(), n.Get(p.Family())+1)
		}
	}
	m.vxlanPools, m.all = n, true
}

func (m *Manager) setBlock(cidr netip.Prefix, b *model.Block) {
	old, had := m.blocks[cidr]
	if b != nil && had && old.Equal(*b) {
		return
	}
	if had {
		for _, c := range calc.BlockClaims(old, m.opts.NodeName) {
			m.unclaim(c)
		}
	}
	if b == nil {
		delete(m.blocks, cidr)
		return
	}
	m.blocks[cidr] = *b
	for _, c := range calc.BlockClaims(*b, m.opts.NodeName) {
		m.claim(c)
	}
}

func (m *Manager) claim(c calc.Claim) {
	list := m.claims[c.Prefix]
	i, _ := slices.BinarySearchFunc(list, c, calc.CompareClaims)
	m.claims[c.Prefix] = slices.Insert(list, i, c)
	byNode := m.byNode[c.Node]
	if byNode == nil {
		byNode = map[netip.Prefix]int{}
		m.byNode[c.Node] = byNode
	}
	byNode[c.Prefix]++
	m.dirty.Add(c.Prefix)
}

func (m *Manager) unclaim(c calc.Claim) {
	list := m.claims[c.Prefix]
	i := slices.Index(list, c)
	if i < 0 {
		return
	}
	if len(list) == 1 {
		delete(m.claims, c.Prefix)
	} else {
		m.claims[c.Prefix] = slices.Delete(list, i, i+1)
	}
	if byNode := m.byNode[c.Node]; byNode[c.Prefix] <= 1 {
		delete(byNode, c.Prefix)
		if len(byNode) == 0 {
			delete(m.byNode, c.Node)
		}
	} else {
		byNode[c.Prefix]--
	}
	m.dirty.Add(c.Prefix)
}

// CompleteDeferredWork brings the devices and their entries in line where something changed
// (everything on a resync) and states the routes that changed. Failures are retried.
func (m *Manager) CompleteDeferredWork(_ context.Context, resync bool) error {
	for _, fam := range ipfamily.All {
		d := m.devs.Get(fam)
		if w := m.vxlanPools.Get(fam) > 0 && m.localOK.Get(fam); w != d.wanted {
			d.wanted, d.dirty = w, true
		}
		for _, c := range m.peers.Get(fam).evaluate(m.local.Get(fam), m.localOK.Get(fam)) {
			if c.wasActive {
				d.table.remove(c.old)
			}
			if c.isNow {
				d.table.set(c.new)
			}
			m.markNode(c.node)
		}
	}
	var errs []error
	for _, fam := range ipfamily.All {
		if err := m.applyDevice(m.devs.Get(fam), resync); err != nil {
			errs = append(errs, err)
		}
	}
	m.decideRoutes()
	if m.opts.Peers != nil {
		for _, fam := range ipfamily.All {
			m.opts.Peers.WithLabelValues(fam.String()).Set(float64(m.devs.Get(fam).table.programmed()))
		}
	}
	if m.opts.NoRoutes != nil {
		m.opts.NoRoutes.Set(float64(len(m.noRoute)))
	}
	m.retryAt = time.Time{}
	if len(errs) > 0 {
		if m.opts.Errors != nil {
			m.opts.Errors.Inc()
		}
		m.retryAt = m.opts.Now().Add(retryInterval)
	}
	return errors.Join(errs...)
}

// NextDeadline is when a failed device or entry is tried again; zero: nothing failed.
func (m *Manager) NextDeadline() time.Time { return m.retryAt }

func (m *Manager) spec(fam ipfamily.Family) DeviceSpec {
	v := m.local.Get(fam)
	return DeviceSpec{
		Name: calc.VXLANDevice(fam), VNI: m.cfg.vni, Port: m.cfg.port, Local: v.Underlay, MAC: v.MAC, Addr: v.Addr,
		MTU: m.cfg.mtu.Get(fam), Uplink: m.opts.Uplink.Get(fam), TxChecksumOffload: m.offload,
	}
}

// applyDevice brings one family's device and then its entries in line.
func (m *Manager) applyDevice(d *device, resync bool) error {
	name := calc.VXLANDevice(d.fam)
	if !d.wanted {
		d.table.setLink(0)
		d.applied = nil
		if !m.inSync || !d.dirty && !resync && !d.failed {
			return nil
		}
		err := m.dev.Remove(name)
		d.dirty = false
		return m.result(d, err)
	}
	spec := m.spec(d.fam)
	if !d.dirty && !resync && !d.failed && d.applied != nil && *d.applied == spec {
		return m.result(d, d.table.apply(m.inSync))
	}
	res, err := m.dev.Apply(spec, m.inSync)
	index := 0
	if res.Link != nil {
		index = res.Link.Attrs().Index
		if m.opts.LinkReady != nil {
			m.opts.LinkReady(res.Link)
		}
	}
	d.table.setLink(index)
	if resync && index != 0 {
		d.table.resync = true
	}
	if res.Held != d.held {
		if res.Held != "" {
			m.opts.Log.Info("VXLAN device differs from the configuration: made again once in sync", "device", name, "differs", res.Held)
		}
		d.held = res.Held
	}
	d.dirty, d.applied = false, nil
	if err == nil {
		d.applied = &spec
		err = d.table.apply(m.inSync)
	}
	return m.result(d, err)
}

// result records the outcome of a device's apply, logging a failure once per change.
func (m *Manager) result(d *device, err error) error {
	d.failed = err != nil
	if err == nil {
		if d.lastErr != "" {
			m.opts.Log.Info("VXLAN device and entries programmed again", "device", calc.VXLANDevice(d.fam))
		}
		d.lastErr = ""
		return nil
	}
	if msg := err.Error(); msg != d.lastErr {
		m.opts.Log.Error("VXLAN device or entries not programmed: retrying", "device", calc.VXLANDevice(d.fam), "error", err)
		d.lastErr = msg
	}
	return fmt.Errorf("%s: %w", calc.VXLANDevice(d.fam), err)
}

// decideRoutes states the routes of the marked prefixes, or of every claimed one when what
// all depend on changed.
func (m *Manager) decideRoutes() {
	var changed []calc.NoRoute
	if m.all {
		for p := range m.claims {
			changed = m.decide(p, changed)
		}
		for p := range m.routes {
			if _, ok := m.claims[p]; !ok {
				changed = m.decide(p, changed)
			}
		}
		m.all = false
	}
	for _, p := range m.dirty.Keys() {
		changed = m.decide(p, changed)
	}
	m.dirty.Clear()
	m.logNoRoutes(changed)
}

// decide states p's route; a prefix that newly has none, or for another reason, is appended to
// changed.
func (m *Manager) decide(p netip.Prefix, changed []calc.NoRoute) []calc.NoRoute {
	var r calc.Route
	var why calc.NoRoute
	if cl := m.claims[p]; len(cl) > 0 {
		if pool, found := m.sorted.For(p); found && pool.VXLAN() {
			best := cl[0]
			var reason string
			r, reason = calc.VXLANRoute(m.underlay, pool, p, m.target(best.Node, ipfamily.OfPrefix(p)))
			if reason != "" {
				why = calc.NoRoute{Prefix: p, Node: best.Node, Reason: reason}
			}
		}
	}
	cur, had := m.routes[p]
	switch {
	case r.Dst.IsValid() && (!had || !cur.Equal(r)):
		m.rt.SetRoute(routetable.ClassVXLAN, r)
		m.routes[p] = r
	case !r.Dst.IsValid() && had:
		m.rt.RemoveRoute(routetable.ClassVXLAN, p)
		delete(m.routes, p)
	}
	old, wasMissing := m.noRoute[p]
	switch {
	case why.Reason == "" && wasMissing:
		delete(m.noRoute, p)
		if r.Dst.IsValid() {
			m.opts.Log.Info("VXLAN route programmed", "prefix", p, "node", old.Node, "route", r)
		}
	case why.Reason != "" && (!wasMissing || old != why):
		m.noRoute[p] = why
		changed = append(changed, why)
	}
	return changed
}

func (m *Manager) target(node string, fam ipfamily.Family) calc.VXLANTarget {
	ul, known := m.nodes[node]
	t := calc.VXLANTarget{Node: node, Known: known, Underlay: ul.Get(fam), LocalVTEP: m.localOK.Get(fam)}
	t.Peer, t.PeerOK, t.Conflict = m.peers.Get(fam).state(node)
	return t
}

// logNoRoutes logs the prefixes that newly have no route: each when they are few, else a
// summary with examples (this node's VTEP missing leaves every remote block without one).
func (m *Manager) logNoRoutes(changed []calc.NoRoute) {
	const each = 10
	if len(changed) <= each {
		for _, n := range changed {
			m.opts.Log.Warn("VXLAN route not programmed", "prefix", n.Prefix, "node", n.Node, "reason", n.Reason)
		}
		return
	}
	slices.SortFunc(changed, func(a, b calc.NoRoute) int { return ipfamily.ComparePrefixes(a.Prefix, b.Prefix) })
	reasons := map[string]int{}
	for _, n := range changed {
		reasons[n.Reason]++
	}
	m.opts.Log.Warn("VXLAN routes not programmed", "count", len(changed), "reasons", reasons, "first", changed[:3])
}

// NoRoutes returns the VXLAN pools' prefixes felix has no route for, with the reasons.
func (m *Manager) NoRoutes() map[netip.Prefix]string {
	out := make(map[netip.Prefix]string, len(m.noRoute))
	for p, n := range m.noRoute {
		out[p] = n.String()
	}
	return out
}

// Wanted tells whether fam's device is wanted, and with which peers, by node.
func (m *Manager) Wanted(fam ipfamily.Family) (bool, map[string]calc.VTEP) {
	d := m.devs.Get(fam)
	if !d.wanted {
		return false, nil
	}
	out := make(map[string]calc.VTEP, len(d.table.peers))
	for _, v := range d.table.peers {
		out[v.Node] = v
	}
	return true, out
}
