package nl

import (
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Fake is an in-memory kernel for unit tests: main-table routes, links and addresses, with
// per-call error injection and the change events a real kernel would send.
type Fake struct {
	mu       sync.Mutex
	routes   map[fakeKey]netlink.Route
	links    map[string]netlink.Link
	indexes  map[int]struct{} // of links: a route's device is checked in constant time, as the kernel does
	addrs    map[string][]netlink.Addr
	nextIdx  int
	failures []*Failure
	calls    map[string]int
	routeCh  chan<- netlink.RouteUpdate
	linkCh   chan<- netlink.LinkUpdate
	onErr    func(error)
	// LinkAddErr, when set, is what LinkAdd answers (e.g. "Unknown device type" for ipip).
	LinkAddErr error
}

type fakeKey struct {
	dst      string
	table    int
	priority int
}

// Failure makes calls of Op whose route (or link name) matches fail with Err. Times < 0 fails
// forever; otherwise the failure is used up after Times calls.
type Failure struct {
	Op    string // RouteReplace, RouteDel, LinkAdd, AddrReplace, RouteList, LinkList...
	Dst   string // route destination to match, "" = any
	Err   error
	Times int
}

// NewFake returns an empty kernel with a loopback.
func NewFake() *Fake {
	f := &Fake{routes: map[fakeKey]netlink.Route{}, links: map[string]netlink.Link{}, indexes: map[int]struct{}{}, addrs: map[string][]netlink.Addr{}, calls: map[string]int{}, nextIdx: 1}
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

// DelLink removes a link and, like the kernel, its routes, without route events.
func (f *Fake) DelLink(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return
	}
	delete(f.links, name)
	delete(f.indexes, l.Attrs().Index)
	delete(f.addrs, name)
	for k, r := range f.routes {
		if r.LinkIndex == l.Attrs().Index {
			delete(f.routes, k)
		}
	}
	if f.linkCh != nil {
		f.sendLink(netlink.LinkUpdate{Link: l, Header: unix.NlMsghdr{Type: unix.RTM_DELLINK}})
	}
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
	if _, ok := f.indexes[r.LinkIndex]; !ok && r.Type != unix.RTN_BLACKHOLE {
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
	return append([]netlink.Addr(nil), f.addrs[l.Attrs().Name]...), nil
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
		s += fmt.Sprintf("%s proto %d type %d link %d gw %v\n", r.Dst, r.Protocol, r.Type, r.LinkIndex, r.Gw)
	}
	return s
}
