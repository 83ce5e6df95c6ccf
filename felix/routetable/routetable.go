// Package routetable makes the kernel's main routing table hold exactly tabby's desired routes,
// as Calico Felix's route table manager does: desired state is recorded and marked dirty, and
// Apply writes the difference against a cache of the kernel kept current by netlink events and
// rebuilt by a full resync.
package routetable

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/internal/dirtyset"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/internal/nlretry"
)

// Options tune a RouteTable.
type Options struct {
	// Protocol marks the routes this table owns (v1.RouteProtocol).
	Protocol int
	// GracePeriod protects a tabby route on a workload interface felix does not know yet: the
	// CNI plugin writes it before felix hears of the pod.
	GracePeriod time.Duration
	// RetryInterval is when a route that failed persistently is tried again.
	RetryInterval time.Duration
	// IsWorkloadInterface tells workload veths (cali*) apart.
	IsWorkloadInterface func(name string) bool
	Now                 func() time.Time
	Log                 *slog.Logger
}

type kkey struct {
	dst      netip.Prefix
	priority int
}

// kroute is the kernel's view of one route, reduced to what felix compares.
type kroute struct {
	proto     int
	typ       int
	scope     int
	linkIndex int
	gw        netip.Addr
	onlink    bool
	// multi is a multipath route's next hops in one comparable form (multipathKey), so that
	// two multipath routes compare equal whatever order the kernel lists their hops in;
	// linkIndex, gw and onlink are then the first hop's.
	multi string
}

// multipathKey is hops in one canonical form: sorted, with only the flag tabby sets (onlink),
// since the kernel adds its own (linkdown, dead) to a hop whose link is down.
func multipathKey(hops []*netlink.NexthopInfo) (string, *netlink.NexthopInfo) {
	type hop struct {
		gw     netip.Addr
		link   int
		onlink bool
	}
	hs := make([]hop, 0, len(hops))
	var first *netlink.NexthopInfo
	for _, h := range hops {
		if h == nil {
			continue
		}
		x := hop{link: h.LinkIndex, onlink: h.Flags&unix.RTNH_F_ONLINK != 0}
		if gw, ok := netip.AddrFromSlice(h.Gw); ok {
			x.gw = gw.Unmap()
		}
		hs = append(hs, x)
	}
	slices.SortFunc(hs, func(a, b hop) int {
		return cmp.Or(a.gw.Compare(b.gw), cmp.Compare(a.link, b.link), cmp.Compare(boolInt(a.onlink), boolInt(b.onlink)))
	})
	var sb strings.Builder
	for i, h := range hs {
		fmt.Fprintf(&sb, "%s@%d/%t;", h.gw, h.link, h.onlink)
		if i == 0 {
			first = &netlink.NexthopInfo{LinkIndex: h.link, Gw: net.IP(h.gw.AsSlice())}
			if h.onlink {
				first.Flags = unix.RTNH_F_ONLINK
			}
		}
	}
	return sb.String(), first
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// usesLink tells whether the route goes out of the interface.
func (r kroute) usesLink(index int) bool {
	return r.linkIndex == index || r.multi != "" && strings.Contains(r.multi, "@"+strconv.Itoa(index)+"/")
}

// setMultipath fills kr from a multipath route's hops.
func (kr *kroute) setMultipath(hops []*netlink.NexthopInfo) {
	key, first := multipathKey(hops)
	if first == nil {
		return
	}
	kr.multi, kr.linkIndex, kr.onlink = key, first.LinkIndex, first.Flags&unix.RTNH_F_ONLINK != 0
	kr.gw, _ = netip.AddrFromSlice(first.Gw)
	kr.gw = kr.gw.Unmap()
}

// RouteError is a route that could not be programmed.
type RouteError struct {
	Dst   netip.Prefix
	Route string
	Err   error
}

func (e RouteError) Error() string { return fmt.Sprintf("route %s: %v", e.Route, e.Err) }

// Result summarises one Apply.
type Result struct {
	// Programmed counts desired routes present in the kernel, by kind.
	Programmed map[calc.Kind]int
	Replaced   int
	Deleted    int
	// Failed are routes left wrong after retries; the next Apply tries them again.
	Failed []RouteError
	// NetlinkErrors counts every failed netlink call, retried ones included.
	NetlinkErrors int
}

// RouteTable owns tabby's routes in the main table.
type RouteTable struct {
	h    nl.Handle
	opts Options
	log  *slog.Logger

	// desired holds the route programmed at each prefix, the best class's (see Class);
	// waiting the other classes' routes to the same prefixes, each taking over when the ones
	// before it let go.
	desired map[netip.Prefix]wish
	waiting map[netip.Prefix][]wish
	// kinds counts desired routes by kind, kept by every setter, so that Apply reports what is
	// programmed without walking thousands of routes for one new pod.
	kinds map[calc.Kind]int
	// byDev indexes desired routes by device, kept by every setter: a link event (a new pod's
	// veth coming up) re-checks that device's routes without walking thousands of others.
	byDev map[string]map[netip.Prefix]struct{}
	// released are routes felix itself stopped wanting: they go at once, without grace.
	released map[netip.Prefix]struct{}
	kernel   map[kkey]kroute
	byDst    map[netip.Prefix][]int // priorities present per dst
	linkIdx  map[string]int
	linkName map[int]string

	dirty      dirtyset.Set[netip.Prefix]
	fullResync bool
	unknownAt  map[netip.Prefix]time.Time // first sight of an unknown workload route
	failed     map[netip.Prefix]RouteError
	retryAt    time.Time
	hostDirty  bool
	hostCache  []calc.HostRoute
	hostStale  bool
	// holdDeletes keeps routes felix does not (yet) want: after a restart, until the datastore
	// and BGP have told felix everything again, a missing route means "not learned yet", not
	// "gone", and deleting it would cut traffic that the kernel is still carrying.
	holdDeletes bool
}

// SetHoldDeletes stops (true) or resumes (false) the removal of routes felix does not want;
// resuming re-examines the whole table.
func (t *RouteTable) SetHoldDeletes(hold bool) {
	if t.holdDeletes && !hold {
		t.fullResync = true
	}
	t.holdDeletes = hold
}

// New returns a table that does a full resync on its first Apply.
func New(h nl.Handle, opts Options) *RouteTable {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.IsWorkloadInterface == nil {
		opts.IsWorkloadInterface = func(string) bool { return false }
	}
	if opts.RetryInterval == 0 {
		opts.RetryInterval = time.Second
	}
	return &RouteTable{
		h: h, opts: opts, log: opts.Log,
		desired: map[netip.Prefix]wish{}, waiting: map[netip.Prefix][]wish{}, kinds: map[calc.Kind]int{}, byDev: map[string]map[netip.Prefix]struct{}{}, released: map[netip.Prefix]struct{}{},
		kernel: map[kkey]kroute{}, byDst: map[netip.Prefix][]int{},
		linkIdx: map[string]int{}, linkName: map[int]string{},
		fullResync: true,
		unknownAt:  map[netip.Prefix]time.Time{}, failed: map[netip.Prefix]RouteError{},
	}
}

// QueueResync makes the next Apply re-read the kernel (periodic resync, lost events).
func (t *RouteTable) QueueResync() { t.fullResync = true }

// Desired returns the route programmed at dst, the best class's.
func (t *RouteTable) Desired(dst netip.Prefix) (calc.Route, bool) {
	w, ok := t.desired[dst]
	return w.route, ok
}

// DesiredRoutes returns a copy of every route the table wants in the kernel.
func (t *RouteTable) DesiredRoutes() map[netip.Prefix]calc.Route {
	out := make(map[netip.Prefix]calc.Route, len(t.desired))
	for dst, w := range t.desired {
		out[dst] = w.route
	}
	return out
}

// HostRoutesChanged reports (and clears) whether a non-tabby route changed since the last call:
// recursive next hops must then be resolved again.
func (t *RouteTable) HostRoutesChanged() bool {
	c := t.hostDirty
	t.hostDirty = false
	return c
}

func (t *RouteTable) hostChanged() {
	t.hostDirty, t.hostStale = true, true
}

// HostRoutes returns the host's own usable unicast routes of the main table, for next-hop
// resolution.
func (t *RouteTable) HostRoutes() []calc.HostRoute {
	if !t.hostStale && t.hostCache != nil {
		return t.hostCache
	}
	out := []calc.HostRoute{}
	for k, r := range t.kernel {
		if r.proto == t.opts.Protocol || r.typ != unix.RTN_UNICAST {
			continue
		}
		dev, ok := t.linkName[r.linkIndex]
		if !ok {
			continue
		}
		out = append(out, calc.HostRoute{Dst: k.dst, Gw: r.gw, Dev: dev, Priority: k.priority})
	}
	t.hostCache, t.hostStale = out, false
	return out
}

// NextDeadline is when Apply has timed work: a grace period ending or a failed route's retry.
// Zero means none.
func (t *RouteTable) NextDeadline() time.Time {
	var next time.Time
	for _, at := range t.unknownAt {
		if d := at.Add(t.opts.GracePeriod); next.IsZero() || d.Before(next) {
			next = d
		}
	}
	if len(t.failed) > 0 && (next.IsZero() || t.retryAt.Before(next)) {
		next = t.retryAt
	}
	return next
}

// Sync re-reads links and routes from the kernel if a resync is queued. Apply calls it; callers
// that need HostRoutes before computing desired routes call it first.
func (t *RouteTable) Sync() error {
	if !t.fullResync {
		return nil
	}
	links, err := t.h.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	t.linkIdx, t.linkName = make(map[string]int, len(links)), make(map[int]string, len(links))
	for _, l := range links {
		t.linkIdx[l.Attrs().Name] = l.Attrs().Index
		t.linkName[l.Attrs().Index] = l.Attrs().Name
	}
	// A dump that raced with a change is repeated from scratch (nlretry): a partial route list
	// would make felix take missing routes for gone ones.
	var kernel map[kkey]kroute
	err = nlretry.Do(func() error {
		kernel = make(map[kkey]kroute, len(t.kernel))
		return t.h.RouteListFilteredIter(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE, func(r netlink.Route) bool {
			if k, kr, ok := fromNetlink(&r); ok {
				kernel[k] = kr
			}
			return true
		})
	})
	if err != nil {
		return fmt.Errorf("list routes of the main table: %w", err)
	}
	t.kernel = kernel
	t.byDst = make(map[netip.Prefix][]int, len(kernel))
	for k := range kernel {
		t.byDst[k.dst] = append(t.byDst[k.dst], k.priority)
	}
	for dst := range t.desired {
		t.dirty.Add(dst)
	}
	for k, r := range kernel {
		if r.proto == t.opts.Protocol {
			t.dirty.Add(k.dst)
		}
	}
	t.fullResync = false
	t.hostChanged()
	return nil
}

// ipv6DefaultMetric is the metric the kernel gives an IPv6 route added without one; IPv4 keeps
// 0. The table reasons in IPv4's terms (priority 0 is the one tabby writes), so an IPv6 route at
// 1024 is read as priority 0 and deleted as 1024.
const ipv6DefaultMetric = 1024

func fromNetlink(r *netlink.Route) (kkey, kroute, bool) {
	if r.Family != 0 && r.Family != unix.AF_INET && r.Family != unix.AF_INET6 {
		return kkey{}, kroute{}, false
	}
	table := r.Table
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	if table != unix.RT_TABLE_MAIN {
		return kkey{}, kroute{}, false
	}
	v6 := r.Family == unix.AF_INET6
	var dst netip.Prefix
	switch {
	case r.Dst == nil && v6:
		dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	case r.Dst == nil:
		dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	default:
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			return kkey{}, kroute{}, false
		}
		if r.Dst.IP.To4() != nil {
			a = a.Unmap()
		}
		ones, _ := r.Dst.Mask.Size()
		dst = netip.PrefixFrom(a, ones)
	}
	kr := kroute{proto: int(r.Protocol), typ: r.Type, scope: int(r.Scope), linkIndex: r.LinkIndex, onlink: r.Flags&unix.RTNH_F_ONLINK != 0}
	prio := r.Priority
	if dst.Addr().Is6() {
		// IPv6 routes carry no scope, and the kernel hangs a blackhole on lo: compare neither.
		kr.scope = 0
		if prio == ipv6DefaultMetric {
			prio = 0
		}
	}
	if r.Type == unix.RTN_BLACKHOLE {
		kr.linkIndex = 0
	}
	if r.Gw != nil {
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			kr.gw = gw.Unmap()
		}
	}
	if r.Type == 0 {
		kr.typ = unix.RTN_UNICAST
	}
	if len(r.MultiPath) > 0 {
		kr.setMultipath(r.MultiPath)
	}
	return kkey{dst: dst, priority: prio}, kr, true
}

// OnRouteUpdate keeps the kernel cache current and marks what changed dirty.
func (t *RouteTable) OnRouteUpdate(u netlink.RouteUpdate) {
	k, kr, ok := fromNetlink(&u.Route)
	if !ok {
		return
	}
	switch u.Type {
	case unix.RTM_NEWROUTE:
		if _, had := t.kernel[k]; !had {
			t.byDst[k.dst] = append(t.byDst[k.dst], k.priority)
		}
		t.kernel[k] = kr
	case unix.RTM_DELROUTE:
		if old, had := t.kernel[k]; !had || old.proto != kr.proto {
			return
		}
		t.forget(k)
	default:
		return
	}
	if kr.proto != t.opts.Protocol && !t.opts.IsWorkloadInterface(t.linkName[kr.linkIndex]) {
		// A route on a workload veth (the kernel's fe80::/64 on every new pod's) never carries
		// a next hop: it must not turn a new pod into a recompute of every route.
		t.hostChanged()
	}
	if _, want := t.desired[k.dst]; want || kr.proto == t.opts.Protocol {
		t.dirty.Add(k.dst)
	}
}

func (t *RouteTable) forget(k kkey) {
	delete(t.kernel, k)
	prios := t.byDst[k.dst]
	for i, p := range prios {
		if p == k.priority {
			prios = append(prios[:i:i], prios[i+1:]...)
			break
		}
	}
	if len(prios) == 0 {
		delete(t.byDst, k.dst)
	} else {
		t.byDst[k.dst] = prios
	}
}

// OnLinkUpdate tracks interface indexes. The kernel drops a deleted link's IPv4 routes without
// telling anyone, so the cache drops them too and the affected routes are re-checked.
func (t *RouteTable) OnLinkUpdate(u netlink.LinkUpdate) {
	a := u.Link.Attrs()
	switch u.Header.Type {
	case unix.RTM_NEWLINK:
		if old, ok := t.linkIdx[a.Name]; ok && old == a.Index {
			// State change only (up/down): routes through it may need re-adding.
			t.markDev(a.Name)
			return
		}
		if old, ok := t.linkIdx[a.Name]; ok {
			t.dropLinkRoutes(old)
			delete(t.linkName, old)
		}
		if oldName, ok := t.linkName[a.Index]; ok {
			delete(t.linkIdx, oldName) // renamed
		}
		t.linkIdx[a.Name] = a.Index
		t.linkName[a.Index] = a.Name
		t.markDev(a.Name)
	case unix.RTM_DELLINK:
		if idx, ok := t.linkIdx[a.Name]; ok && idx == a.Index {
			delete(t.linkIdx, a.Name)
		}
		delete(t.linkName, a.Index)
		t.dropLinkRoutes(a.Index)
		t.markDev(a.Name)
	}
	t.hostChanged()
}

func (t *RouteTable) dropLinkRoutes(index int) {
	for k, r := range t.kernel {
		if r.usesLink(index) {
			t.forget(k)
			t.dirty.Add(k.dst)
		}
	}
}

func (t *RouteTable) markDev(name string) {
	for dst := range t.byDev[name] {
		t.dirty.Add(dst)
	}
}

func (t *RouteTable) indexDev(dst netip.Prefix, dev string) {
	if dev == "" {
		return
	}
	m := t.byDev[dev]
	if m == nil {
		m = map[netip.Prefix]struct{}{}
		t.byDev[dev] = m
	}
	m[dst] = struct{}{}
}

func (t *RouteTable) unindexDev(dst netip.Prefix, dev string) {
	if m := t.byDev[dev]; m != nil {
		delete(m, dst)
		if len(m) == 0 {
			delete(t.byDev, dev)
		}
	}
}

// Apply writes the dirty routes' differences to the kernel.
func (t *RouteTable) Apply() (Result, error) {
	res := Result{Programmed: map[calc.Kind]int{}}
	if err := t.Sync(); err != nil {
		res.NetlinkErrors++
		return res, err
	}
	now := t.opts.Now()
	if len(t.failed) > 0 && !now.Before(t.retryAt) {
		for dst := range t.failed {
			t.dirty.Add(dst)
		}
	}
	for dst, at := range t.unknownAt {
		if now.Sub(at) >= t.opts.GracePeriod {
			t.dirty.Add(dst)
		}
	}

	var ops []nl.RouteOp
	var opDst []netip.Prefix
	var opKey []kkey
	for _, dst := range t.dirty.Keys() {
		delete(t.failed, dst)
		w, wanted := t.desired[dst]
		want := w.route
		var wantNL *netlink.Route
		if wanted {
			r, err := t.toNetlink(want)
			if err != nil {
				t.failed[dst] = RouteError{Dst: dst, Route: want.String(), Err: err}
			} else {
				wantNL = r
			}
		}
		pendingGrace := false
		for _, prio := range t.byDst[dst] {
			k := kkey{dst, prio}
			cur := t.kernel[k]
			if cur.proto != t.opts.Protocol {
				if wanted && prio == 0 && !t.opts.IsWorkloadInterface(t.linkName[cur.linkIndex]) {
					// Another owner's route to the same prefix (on the uplink, a blackhole an
					// operator set): never touch it, say why ours is missing.
					t.failed[dst] = RouteError{Dst: dst, Route: want.String(), Err: fmt.Errorf("a route of protocol %d holds this prefix", cur.proto)}
					wantNL = nil
				}
				continue
			}
			if wanted && prio == 0 {
				continue // handled by the replace below
			}
			if !wanted && t.holdDeletes {
				continue
			}
			if !wanted && prio == 0 && t.opts.IsWorkloadInterface(t.linkName[cur.linkIndex]) {
				if _, rel := t.released[dst]; !rel {
					first, seen := t.unknownAt[dst]
					if !seen {
						t.unknownAt[dst] = now
						first = now
					}
					if now.Sub(first) < t.opts.GracePeriod {
						pendingGrace = true
						continue
					}
				}
			}
			ops = append(ops, nl.RouteOp{Del: true, Route: t.delRoute(k, cur)})
			opDst, opKey = append(opDst, dst), append(opKey, k)
		}
		if !pendingGrace {
			delete(t.unknownAt, dst)
		}
		if wantNL != nil {
			cur, ok := t.kernel[kkey{dst, 0}]
			if ok && cur == t.toKroute(wantNL) {
				continue
			}
			if ok && cur.proto == t.opts.Protocol && replaceRefused(dst, cur, wantNL) {
				ops = append(ops, nl.RouteOp{Del: true, Route: t.delRoute(kkey{dst, 0}, cur)})
				opDst, opKey = append(opDst, dst), append(opKey, kkey{dst, 0})
			}
			ops = append(ops, nl.RouteOp{Route: wantNL})
			opDst, opKey = append(opDst, dst), append(opKey, kkey{dst, 0})
		}
	}
	t.dirty.Clear()

	t.execute(ops, opDst, opKey, &res)

	for k, n := range t.kinds {
		if n != 0 {
			res.Programmed[k] = n
		}
	}
	for dst, e := range t.failed {
		if w, wanted := t.desired[dst]; wanted {
			if res.Programmed[w.route.Kind]--; res.Programmed[w.route.Kind] == 0 {
				delete(res.Programmed, w.route.Kind)
			}
		}
		res.Failed = append(res.Failed, e)
	}
	if len(t.failed) > 0 {
		t.retryAt = now.Add(t.opts.RetryInterval)
	}
	var err error
	if len(res.Failed) > 0 {
		err = fmt.Errorf("%d routes not programmed, e.g. %w", len(res.Failed), res.Failed[0])
	}
	return res, err
}

// execute writes the ops in a batch, retrying transient failures a few times.
func (t *RouteTable) execute(ops []nl.RouteOp, opDst []netip.Prefix, opKey []kkey, res *Result) {
	for attempt := 0; len(ops) > 0; attempt++ {
		errs := t.h.RouteBatch(ops)
		var retryOps []nl.RouteOp
		var retryDst []netip.Prefix
		var retryKey []kkey
		for i, err := range errs {
			op, dst, k := ops[i], opDst[i], opKey[i]
			if err != nil && op.Del && nl.IsNotFound(err) {
				err = nil
			}
			if err == nil {
				if op.Del {
					t.forget(k)
					delete(t.released, dst)
					res.Deleted++
				} else {
					if _, had := t.kernel[k]; !had {
						t.byDst[k.dst] = append(t.byDst[k.dst], k.priority)
					}
					t.kernel[k] = t.toKroute(op.Route)
					res.Replaced++
				}
				continue
			}
			res.NetlinkErrors++
			if nl.IsTransient(err) && attempt < 3 {
				retryOps, retryDst, retryKey = append(retryOps, op), append(retryDst, dst), append(retryKey, k)
				continue
			}
			verb := "replace"
			if op.Del {
				verb = "delete"
			}
			t.failed[dst] = RouteError{Dst: dst, Route: describe(op.Route), Err: fmt.Errorf("%s: %w", verb, err)}
		}
		ops, opDst, opKey = retryOps, retryDst, retryKey
		if len(ops) > 0 {
			time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
		}
	}
}

// replaceRefused tells whether the kernel refuses to replace cur by want in place: it checks an
// IPv6 onlink gateway against the routes that cover it, and refuses one that a unicast route on
// another device covers. The route being replaced does when the gateway lies in its own prefix:
// a block routed natively until its pool turned to VXLAN, whose VTEP is an address of the
// block. Such a route is deleted first, then added.
func replaceRefused(dst netip.Prefix, cur kroute, want *netlink.Route) bool {
	if !dst.Addr().Is6() || want.Flags&unix.RTNH_F_ONLINK == 0 || want.Gw == nil ||
		cur.typ != unix.RTN_UNICAST || cur.linkIndex == want.LinkIndex {
		return false
	}
	gw, ok := netip.AddrFromSlice(want.Gw)
	return ok && dst.Contains(gw)
}

func describe(r *netlink.Route) string {
	s := r.Dst.String()
	if r.Type == unix.RTN_BLACKHOLE {
		return "blackhole " + s
	}
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	for _, h := range r.MultiPath {
		s += fmt.Sprintf(" nexthop via %s oif %d", h.Gw, h.LinkIndex)
	}
	return fmt.Sprintf("%s oif %d proto %d", s, r.LinkIndex, r.Protocol)
}

var errNoLink = errors.New("interface not found")

// ipNet is p in netlink's form, 4 bytes for IPv4 and 16 for IPv6.
func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (t *RouteTable) toNetlink(r calc.Route) (*netlink.Route, error) {
	nr := &netlink.Route{
		Dst:      ipNet(r.Dst),
		Table:    unix.RT_TABLE_MAIN,
		Protocol: netlink.RouteProtocol(t.opts.Protocol),
		Type:     unix.RTN_UNICAST,
	}
	if r.Blackhole() {
		nr.Type = unix.RTN_BLACKHOLE
		return nr, nil
	}
	if len(r.Multipath) > 0 {
		for _, h := range r.Multipath {
			idx, ok := t.linkIdx[h.Dev]
			if !ok {
				return nil, fmt.Errorf("%s: %w", h.Dev, errNoLink)
			}
			nh := &netlink.NexthopInfo{LinkIndex: idx, Gw: net.IP(h.Gw.AsSlice())}
			if h.OnLink {
				nh.Flags = int(netlink.FLAG_ONLINK)
			}
			nr.MultiPath = append(nr.MultiPath, nh)
		}
		return nr, nil
	}
	idx, ok := t.linkIdx[r.Dev]
	if !ok {
		return nil, fmt.Errorf("%s: %w", r.Dev, errNoLink)
	}
	nr.LinkIndex = idx
	switch {
	case r.Gw.IsValid():
		nr.Gw = net.IP(r.Gw.AsSlice())
	case r.Dst.Addr().Is4():
		nr.Scope = netlink.SCOPE_LINK // IPv6 routes have no scope
	}
	if r.OnLink {
		nr.Flags = int(netlink.FLAG_ONLINK)
	}
	return nr, nil
}

func (t *RouteTable) toKroute(r *netlink.Route) kroute {
	kr := kroute{proto: int(r.Protocol), typ: r.Type, scope: int(r.Scope), linkIndex: r.LinkIndex, onlink: r.Flags&unix.RTNH_F_ONLINK != 0}
	if r.Gw != nil {
		gw, _ := netip.AddrFromSlice(r.Gw)
		if r.Gw.To4() != nil {
			gw = gw.Unmap()
		}
		kr.gw = gw
	}
	if len(r.MultiPath) > 0 {
		kr.setMultipath(r.MultiPath)
	}
	return kr
}

func (t *RouteTable) delRoute(k kkey, cur kroute) *netlink.Route {
	prio := k.priority
	if prio == 0 && k.dst.Addr().Is6() {
		prio = ipv6DefaultMetric
	}
	return &netlink.Route{
		Dst:      ipNet(k.dst),
		Table:    unix.RT_TABLE_MAIN,
		Protocol: netlink.RouteProtocol(t.opts.Protocol),
		Priority: prio,
		Type:     cur.typ,
	}
}

// Links returns the interfaces the table knows, by name.
func (t *RouteTable) Links() map[string]int {
	out := make(map[string]int, len(t.linkIdx))
	for n, i := range t.linkIdx {
		out[n] = i
	}
	return out
}

// ResyncQueued tells whether the next Sync re-reads the kernel.
func (t *RouteTable) ResyncQueued() bool { return t.fullResync }
