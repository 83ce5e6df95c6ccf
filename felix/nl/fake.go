package nl

import (
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Fake is an in-memory kernel for unit tests: main-table routes, links and addresses,
// neighbour and FDB entries, with per-call error injection and the change events a real kernel
// would send.
type Fake struct {
	mu       sync.Mutex
	routes   map[fakeKey]netlink.Route
	links    map[string]netlink.Link
	indexes  map[int]struct{} // of links: a route's device is checked in constant time, as the kernel does
	addrs    map[string][]netlink.Addr
	neighs   map[neighKey]netlink.Neigh
	noCsum   map[string]bool // links whose tx checksum offload is off
	nextIdx  int
	failures []*Failure
	calls    map[string]int
	routeCh  chan<- netlink.RouteUpdate
	linkCh   chan<- netlink.LinkUpdate
	neighCh  chan<- netlink.NeighUpdate
	onErr    func(error)
	// LinkAddErr, when set, is what LinkAdd answers (e.g. "Unknown device type" for ipip).
	LinkAddErr error
}

type fakeKey struct {
	dst      string
	table    int
	priority int
}

// neighKey is a neighbour entry (by address) or an FDB entry (by MAC and destination) of a link.
type neighKey struct {
	link   int
	family int
	ip     string
	mac    string
}

// Failure makes calls of Op whose route (link name, neighbour address or FDB entry's MAC) matches fail with Err. Times < 0 fails
// forever; otherwise the failure is used up after Times calls.
type Failure struct {
	Op    string // RouteReplace, RouteDel, LinkAdd, AddrReplace, RouteList, LinkList, NeighSet...
	Dst   string // route destination, link name, neighbour address or MAC to match, "" = any
	Err   error
	Times int
}

// NewFake returns an empty kernel with a loopback.
func NewFake() *Fake {
	f := &Fake{routes: map[fakeKey]netlink.Route{}, links: map[string]netlink.Link{}, indexes: map[int]struct{}{}, addrs: map[string][]netlink.Addr{}, neighs: map[neighKey]netlink.Neigh{}, noCsum: map[string]bool{}, calls: map[string]int{}, nextIdx: 1}
	f.AddLink("lo", 65536)
	return f
}

// Fail registers an injected failure.
func (f *Fake) Fail(fl *Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fl)
}

// Calls counts calls per operation (batched ops count as RouteReplace/RouteDel).
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *Fake) injected(op, dst string) error {
	f.calls[op]++
	for _, fl := range f.failures {
		if fl.Op != op || (fl.Dst != "" && fl.Dst != dst) || fl.Times == 0 {
			continue
		}
		if fl.Times > 0 {
			fl.Times--
		}
		return fl.Err
	}
	return nil
}

// AddLink creates a link (as the CNI plugin or an operator would) and returns its index.
func (f *Fake) AddLink(name string, mtu int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addLinkLocked(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}})
}

func (f *Fake) addLinkLocked(l netlink.Link) int {
	a := l.Attrs()
	a.Index = f.nextIdx
	f.nextIdx++
	f.links[a.Name] = l
	f.indexes[a.Index] = struct{}{}
	if f.linkCh != nil {
		f.sendLink(netlink.LinkUpdate{Link: l, Header: unix.NlMsghdr{Type: unix.RTM_NEWLINK}})
	}
	return a.Index
}

// DelLink removes a link and, like the kernel, its routes and neighbours, without route or
// neighbour events.
func (f *Fake) DelLink(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delLinkLocked(name)
}

func (f *Fake) delLinkLocked(name string) bool {
	l, ok := f.links[name]
	if !ok {
		return false
	}
	idx := l.Attrs().Index
	delete(f.links, name)
	delete(f.indexes, idx)
	delete(f.addrs, name)
	delete(f.noCsum, name)
	for k, r := range f.routes {
		if routeUsesLink(&r, idx) {
			delete(f.routes, k)
		}
	}
	for k := range f.neighs {
		if k.link == idx {
			delete(f.neighs, k)
		}
	}
	if f.linkCh != nil {
		f.sendLink(netlink.LinkUpdate{Link: l, Header: unix.NlMsghdr{Type: unix.RTM_DELLINK}})
	}
	return true
}

// routeUsesLink tells whether r goes out of the link: the kernel removes a route with a next hop
// on a link that is deleted, a multipath route whole.
func routeUsesLink(r *netlink.Route, idx int) bool {
	if r.LinkIndex == idx {
		return true
	}
	for _, h := range r.MultiPath {
		if h != nil && h.LinkIndex == idx {
			return true
		}
	}
	return false
}

// Routes returns the table's routes sorted by destination.
func (f *Fake) Routes() []netlink.Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]netlink.Route, 0, len(f.routes))
	for _, r := range f.routes {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dst.String() < out[j].Dst.String() })
	return out
}

// Route returns the route to dst at priority 0.
func (f *Fake) Route(dst string) (netlink.Route, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.routes[fakeKey{dst: dst, table: unix.RT_TABLE_MAIN}]
	return r, ok
}

// InjectRoute adds a route behind felix's back (an operator, the CNI plugin, another daemon).
func (f *Fake) InjectRoute(r netlink.Route) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Table == 0 {
		r.Table = unix.RT_TABLE_MAIN
	}
	if r.Family == 0 {
		r.Family = familyOf(&r)
	}
	f.routes[keyOf(&r)] = r
	f.notify(r, unix.RTM_NEWROUTE)
}

// RemoveRoute deletes a route behind felix's back.
func (f *Fake) RemoveRoute(dst string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fakeKey{dst: dst, table: unix.RT_TABLE_MAIN}
	if r, ok := f.routes[k]; ok {
		delete(f.routes, k)
		f.notify(r, unix.RTM_DELROUTE)
	}
}

func (f *Fake) notify(r netlink.Route, typ uint16) {
	if f.routeCh == nil {
		return
	}
	select {
	case f.routeCh <- netlink.RouteUpdate{Type: typ, Route: r}:
	default:
		f.overflow()
	}
}

// overflow is what a real socket does when the reader falls behind: events are lost and the
// subscriber is told so.
func (f *Fake) overflow() {
	if f.onErr != nil {
		go f.onErr(unix.ENOBUFS)
	}
}

func (f *Fake) sendLink(u netlink.LinkUpdate) {
	select {
	case f.linkCh <- u:
	default:
		f.overflow()
	}
}

// familyOf is the route's family as the kernel reports it: its destination's.
func familyOf(r *netlink.Route) int {
	if r.Dst != nil && r.Dst.IP.To4() == nil {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func keyOf(r *netlink.Route) fakeKey {
	t := r.Table
	if t == 0 {
		t = unix.RT_TABLE_MAIN
	}
	return fakeKey{dst: r.Dst.String(), table: t, priority: r.Priority}
}

func dstOf(r *netlink.Route) string {
	if r.Dst == nil {
		return "<nil>"
	}
	return r.Dst.String()
}

func (f *Fake) RouteListFilteredIter(family int, filter *netlink.Route, mask uint64, fn func(netlink.Route) bool) error {
	f.mu.Lock()
	if err := f.injected("RouteList", ""); err != nil {
		f.mu.Unlock()
		return err
	}
	var list []netlink.Route
	for _, r := range f.routes {
		if family != netlink.FAMILY_ALL && family != r.Family {
			continue
		}
		if mask&netlink.RT_FILTER_TABLE != 0 && filter.Table != r.Table {
			continue
		}
		if mask&netlink.RT_FILTER_PROTOCOL != 0 && filter.Protocol != r.Protocol {
			continue
		}
		list = append(list, r)
	}
	f.mu.Unlock()
	for _, r := range list {
		if !fn(r) {
			break
		}
	}
	return nil
}

func (f *Fake) RouteReplace(r *netlink.Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replaceLocked(r)
}

func (f *Fake) replaceLocked(r *netlink.Route) error {
	if err := f.injected("RouteReplace", dstOf(r)); err != nil {
		return err
	}
	if r.Dst == nil {
		return unix.EINVAL
	}
	if len(r.MultiPath) > 0 {
		for _, h := range r.MultiPath {
			if _, ok := f.indexes[h.LinkIndex]; !ok {
				return unix.ENODEV
			}
			if h.Gw == nil || (h.Gw.To4() == nil) != (r.Dst.IP.To4() == nil) {
				return unix.EINVAL
			}
		}
	} else if _, ok := f.indexes[r.LinkIndex]; !ok && r.Type != unix.RTN_BLACKHOLE {
		return unix.ENODEV
	}
	c := *r
	if c.Table == 0 {
		c.Table = unix.RT_TABLE_MAIN
	}
	if c.Type == 0 {
		c.Type = unix.RTN_UNICAST
	}
	c.Family = familyOf(&c)
	f.routes[keyOf(&c)] = c
	f.notify(c, unix.RTM_NEWROUTE)
	return nil
}

func (f *Fake) RouteDel(r *netlink.Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delLocked(r)
}

func (f *Fake) delLocked(r *netlink.Route) error {
	if err := f.injected("RouteDel", dstOf(r)); err != nil {
		return err
	}
	k := keyOf(r)
	old, ok := f.routes[k]
	if !ok || (r.Protocol != 0 && old.Protocol != r.Protocol) {
		return unix.ESRCH
	}
	delete(f.routes, k)
	f.notify(old, unix.RTM_DELROUTE)
	return nil
}

func (f *Fake) RouteBatch(ops []RouteOp) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["RouteBatch"]++
	errs := make([]error, len(ops))
	for i, op := range ops {
		if op.Del {
			errs[i] = f.delLocked(op.Route)
		} else {
			errs[i] = f.replaceLocked(op.Route)
		}
	}
	return errs
}

func (f *Fake) LinkList() ([]netlink.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("LinkList", ""); err != nil {
		return nil, err
	}
	out := make([]netlink.Link, 0, len(f.links))
	for _, l := range f.links {
		out = append(out, l)
	}
	return out, nil
}

func (f *Fake) LinkByName(name string) (netlink.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("LinkByName", name); err != nil {
		return nil, err
	}
	l, ok := f.links[name]
	if !ok {
		return nil, netlink.LinkNotFoundError{}
	}
	return l, nil
}

func (f *Fake) LinkAdd(l netlink.Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("LinkAdd", l.Attrs().Name); err != nil {
		return err
	}
	if f.LinkAddErr != nil {
		return f.LinkAddErr
	}
	if _, ok := f.links[l.Attrs().Name]; ok {
		return unix.EEXIST
	}
	f.addLinkLocked(l)
	return nil
}

func (f *Fake) LinkSetUp(l netlink.Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("LinkSetUp", l.Attrs().Name); err != nil {
		return err
	}
	cur, ok := f.links[l.Attrs().Name]
	if !ok {
		return unix.ENODEV
	}
	cur.Attrs().Flags |= net.FlagUp
	cur.Attrs().OperState = netlink.OperUp
	return nil
}

func (f *Fake) LinkSetMTU(l netlink.Link, mtu int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("LinkSetMTU", l.Attrs().Name); err != nil {
		return err
	}
	cur, ok := f.links[l.Attrs().Name]
	if !ok {
		return unix.ENODEV
	}
	cur.Attrs().MTU = mtu
	return nil
}

func (f *Fake) AddrList(l netlink.Link, family int) ([]netlink.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netlink.Addr
	for _, a := range f.addrs[l.Attrs().Name] {
		v4 := a.IP.To4() != nil
		if family == netlink.FAMILY_ALL || family == unix.AF_INET && v4 || family == unix.AF_INET6 && !v4 {
			out = append(out, a)
		}
	}
	return out, nil
}

func (f *Fake) AddrReplace(l netlink.Link, a *netlink.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("AddrReplace", l.Attrs().Name); err != nil {
		return err
	}
	name := l.Attrs().Name
	for _, cur := range f.addrs[name] {
		if cur.IPNet.String() == a.IPNet.String() {
			return nil
		}
	}
	f.addrs[name] = append(f.addrs[name], *a)
	return nil
}

func (f *Fake) AddrDel(l netlink.Link, a *netlink.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := l.Attrs().Name
	list := f.addrs[name]
	for i, cur := range list {
		if cur.IPNet.String() == a.IPNet.String() {
			f.addrs[name] = append(list[:i:i], list[i+1:]...)
			return nil
		}
	}
	return unix.EADDRNOTAVAIL
}

// Subscribe delivers events from the mutating call; a full channel counts as an overflow.
func (f *Fake) Subscribe(done <-chan struct{}, routes chan<- netlink.RouteUpdate, links chan<- netlink.LinkUpdate, onErr func(error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("Subscribe", ""); err != nil {
		return err
	}
	f.routeCh, f.linkCh, f.onErr = routes, links, onErr
	go func() {
		<-done
		f.mu.Lock()
		f.routeCh, f.linkCh, f.onErr = nil, nil, nil
		f.mu.Unlock()
	}()
	return nil
}

func (f *Fake) Close() {}

var _ Handle = (*Fake)(nil)
var _ Handle = (*Real)(nil)

// String summarises the table for test failure messages.
func (f *Fake) String() string {
	s := ""
	for _, r := range f.Routes() {
		s += fmt.Sprintf("%s proto %d type %d link %d gw %v", r.Dst, r.Protocol, r.Type, r.LinkIndex, r.Gw)
		for _, h := range r.MultiPath {
			s += fmt.Sprintf(" nexthop link %d gw %v", h.LinkIndex, h.Gw)
		}
		s += "\n"
	}
	return s
}

func (f *Fake) LinkDel(l netlink.Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("LinkDel", l.Attrs().Name); err != nil {
		return err
	}
	if !f.delLinkLocked(l.Attrs().Name) {
		return netlink.LinkNotFoundError{}
	}
	return nil
}

func (f *Fake) LinkSetHardwareAddr(l netlink.Link, hw net.HardwareAddr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("LinkSetHardwareAddr", l.Attrs().Name); err != nil {
		return err
	}
	cur, ok := f.links[l.Attrs().Name]
	if !ok {
		return unix.ENODEV
	}
	cur.Attrs().HardwareAddr = append(net.HardwareAddr(nil), hw...)
	return nil
}

func keyOfNeigh(n *netlink.Neigh) neighKey {
	k := neighKey{link: n.LinkIndex, family: n.Family}
	if k.family == 0 {
		k.family = unix.AF_INET
		if n.IP.To4() == nil {
			k.family = unix.AF_INET6
		}
	}
	if n.IP != nil {
		k.ip = n.IP.String()
	}
	if k.family == unix.AF_BRIDGE {
		k.mac = n.HardwareAddr.String()
	}
	return k
}

// neighName is what a Failure's Dst matches of a neighbour entry: its address, or an FDB
// entry's MAC.
func neighName(n *netlink.Neigh) string {
	if n.Family == unix.AF_BRIDGE {
		return n.HardwareAddr.String()
	}
	return n.IP.String()
}

func (f *Fake) notifyNeigh(n netlink.Neigh, typ uint16) {
	if f.neighCh == nil {
		return
	}
	select {
	case f.neighCh <- netlink.NeighUpdate{Type: typ, Neigh: n}:
	default:
		f.overflow()
	}
}

// NeighList lists a link's neighbour entries (AF_INET, AF_INET6) or FDB entries (AF_BRIDGE).
func (f *Fake) NeighList(linkIndex, family int) ([]netlink.Neigh, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("NeighList", ""); err != nil {
		return nil, err
	}
	var out []netlink.Neigh
	for k, n := range f.neighs {
		if (linkIndex == 0 || k.link == linkIndex) && (family == 0 || k.family == family) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := keyOfNeigh(&out[i]), keyOfNeigh(&out[j])
		return a.mac+a.ip < b.mac+b.ip
	})
	return out, nil
}

// NeighSet creates or replaces an entry. Like the kernel's vxlan driver, replacing the FDB entry
// of a MAC with a new destination replaces one of its destinations, not all.
func (f *Fake) NeighSet(n *netlink.Neigh) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("NeighSet", neighName(n)); err != nil {
		return err
	}
	if _, ok := f.indexes[n.LinkIndex]; !ok {
		return unix.ENODEV
	}
	c := *n
	k := keyOfNeigh(&c)
	c.Family = k.family
	if k.family == unix.AF_BRIDGE {
		if _, exact := f.neighs[k]; !exact {
			var others []neighKey
			for o := range f.neighs {
				if o.link == k.link && o.family == k.family && o.mac == k.mac {
					others = append(others, o)
				}
			}
			if len(others) > 0 {
				sort.Slice(others, func(i, j int) bool { return others[i].ip < others[j].ip })
				old := f.neighs[others[0]]
				delete(f.neighs, others[0])
				f.notifyNeigh(old, unix.RTM_DELNEIGH)
			}
		}
	}
	f.neighs[k] = c
	f.notifyNeigh(c, unix.RTM_NEWNEIGH)
	return nil
}

// NeighDel deletes an entry; an FDB entry given without destination goes with all of its MAC's.
func (f *Fake) NeighDel(n *netlink.Neigh) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("NeighDel", neighName(n)); err != nil {
		return err
	}
	k := keyOfNeigh(n)
	var gone []neighKey
	if k.ip != "" { // named whole: found without a scan, which benchmarks would measure
		if _, ok := f.neighs[k]; ok {
			gone = append(gone, k)
		}
	} else {
		for o := range f.neighs {
			if o.link == k.link && o.family == k.family && o.mac == k.mac {
				gone = append(gone, o)
			}
		}
	}
	if len(gone) == 0 {
		return unix.ENOENT
	}
	for _, o := range gone {
		old := f.neighs[o]
		delete(f.neighs, o)
		f.notifyNeigh(old, unix.RTM_DELNEIGH)
	}
	return nil
}

func (f *Fake) TxChecksumOffload(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("TxChecksumOffload", name); err != nil {
		return false, err
	}
	if _, ok := f.links[name]; !ok {
		return false, unix.ENODEV
	}
	return !f.noCsum[name], nil
}

func (f *Fake) SetTxChecksumOffload(name string, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("SetTxChecksumOffload", name); err != nil {
		return err
	}
	if _, ok := f.links[name]; !ok {
		return unix.ENODEV
	}
	f.noCsum[name] = !on
	return nil
}

// SubscribeNeigh delivers neighbour events from the mutating calls, as Subscribe does.
func (f *Fake) SubscribeNeigh(done <-chan struct{}, neighs chan<- netlink.NeighUpdate, onErr func(error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("SubscribeNeigh", ""); err != nil {
		return err
	}
	f.neighCh = neighs
	if f.onErr == nil {
		f.onErr = onErr
	}
	go func() {
		<-done
		f.mu.Lock()
		f.neighCh = nil
		f.mu.Unlock()
	}()
	return nil
}
