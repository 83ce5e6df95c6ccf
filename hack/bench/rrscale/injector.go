package main

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/bgpwire"
)

// injector is N BGP clients in one namespace: one listening socket, one source address per
// client, one TCP session per client and reflector. It speaks just enough BGP-4 (RFC 4271,
// MP-BGP IPv6 unicast, RFC 4760) to announce each client's blocks and to timestamp every
// reflected route at the moment it is read off the wire, which a pool of full daemons in one
// namespace could not do (and would hold N² routes each). Each client has its own router ID:
// a reflected route carries the originator's ID, and a client sharing it would drop the route.
//
// The clients are passive, as a tabby node whose address is above its reflector's is: the
// reflectors dial them.
type injector struct {
	asn     uint16
	rrs     []netip.Addr
	clients []*client
	byAddr  map[netip.Addr]*client
	// blocks are every block of the run: one per client first, then the samples'.
	blocks   []netip.Prefix
	blockIdx map[netip.Prefix]int
	owner    []int // the client announcing each block: its address is the block's next hop

	ln net.Listener

	established atomic.Int64
	opened      atomic.Int64 // sessions that reached Established, ever
	received    atomic.Int64 // (session, another client's initial block) pairs held
	covered     atomic.Int64 // (client, another client's initial block) pairs held from any reflector
	badNextHop  atomic.Int64
	firstBad    atomic.Value // string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	ends  map[string]int64 // why established sessions ended, ever
}

// ended counts an established session's end by its reason.
func (in *injector) ended(why string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.ends == nil {
		in.ends = map[string]int64{}
	}
	in.ends[why]++
}

// endHold is why a session ended when the client's hold timer ended it: the reflector sent
// nothing, not even a keepalive, for the hold time.
const endHold = "the client's hold timer"

// endsSince returns the ends counted since an earlier copy of the tally, by reason.
func (in *injector) endsSince(before map[string]int64) map[string]int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	d := map[string]int64{}
	for why, n := range in.ends {
		if n > before[why] {
			d[why] = n - before[why]
		}
	}
	return d
}

// describeEnds tells the ends by reason, most frequent first.
func describeEnds(ends map[string]int64) string {
	whys := slices.Collect(maps.Keys(ends))
	slices.SortFunc(whys, func(a, b string) int { return cmp.Or(cmp.Compare(ends[b], ends[a]), strings.Compare(a, b)) })
	parts := make([]string, len(whys))
	for i, why := range whys {
		parts[i] = fmt.Sprintf("%d× %s", ends[why], why)
	}
	return strings.Join(parts, ", ")
}

// endsSoFar copies the tally.
func (in *injector) endsSoFar() map[string]int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.ends)
}

type client struct {
	idx  int
	addr netip.Addr
	id   [4]byte

	have []atomic.Int32 // per block: how many of the client's sessions hold it

	mu     sync.Mutex
	blocks []int // announced, by index
	sess   []*session
}

// sessions is the client's session per reflector (nil: none), as it is now.
func (c *client) sessions() []*session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*session(nil), c.sess...)
}

// setBlocks changes what the client announces, and returns its sessions to tell them.
func (c *client) setBlocks(f func([]int) []int) []*session {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocks = f(c.blocks)
	return append([]*session(nil), c.sess...)
}

type session struct {
	in    *injector
	c     *client
	rr    int
	conn  net.Conn
	wmu   sync.Mutex
	up    time.Time
	first []atomic.Int64 // per block: unix nanos of its arrival on this session, 0 = absent
	gone  []atomic.Int64 // per block: unix nanos of its last withdrawal on this session
	// lastRead: unix nanos of the last bytes read from the reflector.
	lastRead atomic.Int64
	// replaced: a newer session of the same client and reflector closed this one;
	// expired: the client's hold timer did.
	replaced, expired atomic.Bool
}

func newSession(in *injector, c *client, rr int, conn net.Conn) *session {
	s := &session{in: in, c: c, rr: rr, conn: conn, first: make([]atomic.Int64, len(in.blocks)), gone: make([]atomic.Int64, len(in.blocks))}
	// Written now, not first at the run's first withdrawal: then every session's reader
	// faulting in the record's fresh pages at once made that withdrawal read late, and only in
	// the phase that ran first.
	for i := range s.gone {
		s.gone[i].Store(0)
	}
	return s
}

// stampReader notes when bytes arrive.
type stampReader struct {
	net.Conn
	last *atomic.Int64
}

func (s stampReader) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if n > 0 {
		s.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func newInjector(clients []netip.Addr, rrs []netip.Addr, blocks []netip.Prefix, owner []int, asn uint16) *injector {
	in := &injector{asn: asn, rrs: rrs, byAddr: map[netip.Addr]*client{}, blocks: blocks,
		blockIdx: map[netip.Prefix]int{}, owner: owner, conns: map[net.Conn]struct{}{}}
	for i, b := range blocks {
		in.blockIdx[b] = i
	}
	for i, a := range clients {
		// In 240.0.0.0/4 like the IPv6-only reflectors' name-derived IDs: the caller checks
		// that none is theirs.
		c := &client{idx: i, addr: a, id: [4]byte{241, byte(i >> 16), byte(i >> 8), byte(i)}, blocks: []int{i},
			sess: make([]*session, len(rrs)), have: make([]atomic.Int32, len(blocks))}
		in.clients = append(in.clients, c)
		in.byAddr[a] = c
	}
	return in
}

// listen opens the clients' listening socket inside the namespace.
func (in *injector) listen(netns string) error {
	h, err := ns.GetNS(lab.NetnsPath(netns))
	if err != nil {
		return err
	}
	defer h.Close()
	return h.Do(func(ns.NetNS) error {
		var err error
		in.ln, err = net.Listen("tcp6", "[::]:179")
		return err
	})
}

func (in *injector) serve() {
	for {
		conn, err := in.ln.Accept()
		if err != nil {
			return
		}
		go in.handle(conn)
	}
}

func (in *injector) close() {
	if in.ln != nil {
		in.ln.Close()
	}
	in.dropAll()
}

// dropAll closes every session (between the two reflector implementations).
func (in *injector) dropAll() {
	in.mu.Lock()
	for c := range in.conns {
		c.Close()
	}
	in.mu.Unlock()
}

// reset takes every client back to its initial block once all sessions are gone.
func (in *injector) reset() {
	for _, c := range in.clients {
		c.mu.Lock()
		c.blocks = []int{c.idx}
		c.mu.Unlock()
	}
}

func addrOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

func (in *injector) handle(conn net.Conn) {
	in.mu.Lock()
	in.conns[conn] = struct{}{}
	in.mu.Unlock()
	defer func() {
		conn.Close()
		in.mu.Lock()
		delete(in.conns, conn)
		in.mu.Unlock()
	}()
	c := in.byAddr[addrOf(conn.LocalAddr())]
	rr := -1
	for i, a := range in.rrs {
		if a == addrOf(conn.RemoteAddr()) {
			rr = i
		}
	}
	if c == nil || rr < 0 {
		return
	}
	s := newSession(in, c, rr, conn)
	r := bufio.NewReaderSize(stampReader{conn, &s.lastRead}, 64<<10)
	if s.send(openMsg(in.asn, 90, c.id)) != nil {
		return
	}
	typ, body, err := bgpwire.ReadMessage(r)
	if err != nil || typ != bgpwire.MsgOpen || len(body) < 9 {
		return
	}
	hold := time.Duration(binary.BigEndian.Uint16(body[3:5])) * time.Second
	hold = min(hold, 90*time.Second)
	if s.send(bgpwire.Frame(bgpwire.MsgKeepalive, nil)) != nil {
		return
	}
	if typ, _, err = bgpwire.ReadMessage(r); err != nil || typ != bgpwire.MsgKeepalive {
		return
	}
	s.up = time.Now()
	s.lastRead.Store(s.up.UnixNano())
	c.mu.Lock()
	old := c.sess[rr]
	c.sess[rr] = s
	var announce []netip.Prefix
	for _, i := range c.blocks {
		announce = append(announce, in.blocks[i])
	}
	c.mu.Unlock()
	if old != nil {
		old.replaced.Store(true)
		old.conn.Close()
	}
	in.established.Add(1)
	in.opened.Add(1)
	why := "closed by the injector"
	defer func() {
		switch {
		case s.replaced.Load():
			why = "replaced by a new session from the same reflector"
		case s.expired.Load():
			why = endHold
		}
		in.ended(why)
		c.mu.Lock()
		if c.sess[rr] == s {
			c.sess[rr] = nil
		}
		c.mu.Unlock()
		in.established.Add(-1)
		for i := range s.first {
			if s.first[i].Swap(0) != 0 {
				s.dropped(i)
			}
		}
	}()
	if len(announce) > 0 && s.send(updateMsg(c.addr, announce, nil)) != nil {
		why = "send failed"
		return
	}
	// End-of-RIB, as a tabby node sends it: a restarted reflector waits for it from every
	// client before it calls its routes in sync.
	if s.send(eorMsg()) != nil {
		why = "send failed"
		return
	}
	done := make(chan struct{})
	defer close(done)
	if hold > 0 {
		go s.keepalive(hold, done)
	}
	for {
		typ, body, err := bgpwire.ReadMessage(r)
		if err != nil {
			why = "read: " + err.Error()
			return
		}
		switch typ {
		case bgpwire.MsgUpdate:
			s.update(body, time.Now().UnixNano())
		case bgpwire.MsgNotification:
			why = "NOTIFICATION from the reflector"
			if len(body) >= 2 {
				why = fmt.Sprintf("NOTIFICATION %d/%d from the reflector", body[0], body[1])
			}
			return
		}
	}
}

// keepalive sends a keepalive every third of the hold time, and holds the reflector to it as
// a tabby node's GoBGP does: a reflector that sent nothing (no keepalive either) for the hold
// time loses the session. Bytes the kernel holds unread count as sent: this process may be
// too busy to read them in time.
func (s *session) keepalive(hold time.Duration, done <-chan struct{}) {
	t := time.NewTicker(hold / 3)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if time.Since(time.Unix(0, s.lastRead.Load())) > hold && unread(s.conn) == 0 {
				s.expired.Store(true)
				_ = s.send(bgpwire.Frame(bgpwire.MsgNotification, []byte{4, 0})) // Hold Timer Expired
				s.conn.Close()
				return
			}
			if s.send(bgpwire.Frame(bgpwire.MsgKeepalive, nil)) != nil {
				return
			}
		}
	}
}

func (s *session) send(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := s.conn.Write(b)
	return err
}

// announce sends block (by index) from client c on every session it has; the block counts as
// announced for sessions that come up later too.
func (in *injector) announce(c *client, block int) (sent int, err error) {
	sess := c.setBlocks(func(b []int) []int { return append(b, block) })
	return sendOnAll(sess, updateMsg(c.addr, []netip.Prefix{in.blocks[block]}, nil))
}

// sendOnAll sends msg on every session there is.
func sendOnAll(sess []*session, msg []byte) (sent int, err error) {
	var errs []error
	for _, s := range sess {
		if s == nil {
			continue
		}
		if err := s.send(msg); err != nil {
			errs = append(errs, err)
			continue
		}
		sent++
	}
	return sent, errors.Join(errs...)
}

// withdraw withdraws block from c on every session it has.
func (in *injector) withdraw(c *client, block int) (sent int, err error) {
	sess := c.setBlocks(func(b []int) []int { return slices.DeleteFunc(b, func(b int) bool { return b == block }) })
	return sendOnAll(sess, updateMsg(c.addr, nil, []netip.Prefix{in.blocks[block]}))
}

// update records the IPv6 unicast prefixes an UPDATE reaches or withdraws.
func (s *session) update(b []byte, now int64) {
	if len(b) < 4 {
		return
	}
	wl := int(binary.BigEndian.Uint16(b))
	if 2+wl+2 > len(b) {
		return
	}
	al := int(binary.BigEndian.Uint16(b[2+wl:]))
	attrs := b[4+wl:]
	if al > len(attrs) {
		return
	}
	attrs = attrs[:al]
	for len(attrs) >= 3 {
		flags, typ := attrs[0], attrs[1]
		var l, h int
		if flags&0x10 != 0 {
			if len(attrs) < 4 {
				return
			}
			l, h = int(binary.BigEndian.Uint16(attrs[2:])), 4
		} else {
			l, h = int(attrs[2]), 3
		}
		if h+l > len(attrs) {
			return
		}
		v := attrs[h : h+l]
		attrs = attrs[h+l:]
		switch {
		case typ == 14 && len(v) >= 5 && binary.BigEndian.Uint16(v) == 2 && v[2] == 1:
			nhl := int(v[3])
			if 4+nhl+1 > len(v) || nhl < 16 {
				continue
			}
			nh := netip.AddrFrom16([16]byte(v[4:20]))
			eachPrefix(v[4+nhl+1:], func(p netip.Prefix) { s.reached(p, nh, now) })
		case typ == 15 && len(v) >= 3 && binary.BigEndian.Uint16(v) == 2 && v[2] == 1:
			eachPrefix(v[3:], func(p netip.Prefix) { s.withdrawn(p, now) })
		}
	}
}

func (s *session) counts(i int) bool { return i < len(s.in.clients) && i != s.c.idx }

func (s *session) reached(p netip.Prefix, nh netip.Addr, now int64) {
	i, ok := s.in.blockIdx[p]
	if !ok {
		return
	}
	if want := s.in.clients[s.in.owner[i]].addr; nh != want {
		if s.in.badNextHop.Add(1) == 1 {
			s.in.firstBad.Store(fmt.Sprintf("%s via %s at client %s, want via %s", p, nh, s.c.addr, want))
		}
	}
	if s.first[i].CompareAndSwap(0, now) && s.counts(i) {
		s.in.received.Add(1)
		if s.c.have[i].Add(1) == 1 {
			s.in.covered.Add(1)
		}
	}
}

// dropped accounts for block i gone from the session (withdrawn, or the session closed).
func (s *session) dropped(i int) {
	if !s.counts(i) {
		return
	}
	s.in.received.Add(-1)
	if s.c.have[i].Add(-1) == 0 {
		s.in.covered.Add(-1)
	}
}

func (s *session) withdrawn(p netip.Prefix, now int64) {
	i, ok := s.in.blockIdx[p]
	if !ok {
		return
	}
	if s.first[i].Swap(0) != 0 {
		s.gone[i].Store(now)
		s.dropped(i)
	}
}

// missing describes which initial blocks the sessions lack: a count per reflector and a few
// examples.
func (in *injector) missing() string {
	per := make([]int, len(in.rrs))
	var ex []string
	for _, c := range in.clients {
		sess := c.sessions()
		for rr, s := range sess {
			if s == nil {
				per[rr] += len(in.clients) - 1
				continue
			}
			for i := range in.clients {
				if i != c.idx && s.first[i].Load() == 0 {
					per[rr]++
					if len(ex) < 4 {
						ex = append(ex, fmt.Sprintf("%s lacks %s (of %s) from %s", c.addr, in.blocks[i], in.clients[i].addr, in.rrs[rr]))
					}
				}
			}
		}
	}
	out := ""
	for rr, n := range per {
		out += fmt.Sprintf("%d missing from %s; ", n, in.rrs[rr])
	}
	return out + fmt.Sprint(ex)
}

// goneAt is when client c last lost block i from a reflector, once no reflector's session
// holds it (ok false: one still does).
func (in *injector) goneAt(c *client, i int) (at time.Time, ok bool) {
	var last int64
	for _, s := range c.sessions() {
		if s == nil {
			continue
		}
		if s.first[i].Load() != 0 {
			return time.Time{}, false
		}
		last = max(last, s.gone[i].Load())
	}
	return time.Unix(0, last), true
}

// arrival is when client c first held block i from any reflector (zero: not yet).
func (in *injector) arrival(c *client, i int) time.Time {
	var best int64
	for _, s := range c.sessions() {
		if s == nil {
			continue
		}
		if t := s.first[i].Load(); t != 0 && (best == 0 || t < best) {
			best = t
		}
	}
	if best == 0 {
		return time.Time{}
	}
	return time.Unix(0, best)
}

func eachPrefix(b []byte, f func(netip.Prefix)) {
	for len(b) > 0 {
		bits := int(b[0])
		n := (bits + 7) / 8
		if bits > 128 || 1+n > len(b) {
			return
		}
		var a [16]byte
		copy(a[:], b[1:1+n])
		f(netip.PrefixFrom(netip.AddrFrom16(a), bits))
		b = b[1+n:]
	}
}

// openMsg offers IPv6 unicast, 4-octet AS numbers, route refresh and graceful restart (120 s,
// IPv6 unicast), as a tabby node's session does.
func openMsg(asn uint16, hold uint16, id [4]byte) []byte {
	caps := []byte{1, 4, 0, 2, 0, 1, 65, 4, 0, 0, byte(asn >> 8), byte(asn), 2, 0, 64, 6, 0, 120, 0, 2, 1, 0}
	body := []byte{4, byte(asn >> 8), byte(asn), byte(hold >> 8), byte(hold), id[0], id[1], id[2], id[3], byte(2 + len(caps)), 2, byte(len(caps))}
	return bgpwire.Frame(bgpwire.MsgOpen, append(body, caps...))
}

// eorMsg is IPv6 unicast's End-of-RIB marker: an empty MP_UNREACH_NLRI (RFC 4724).
func eorMsg() []byte {
	return bgpwire.Frame(bgpwire.MsgUpdate, []byte{0, 0, 0, 6, 0x80, 15, 3, 0, 2, 1})
}

// updateMsg announces IPv6 prefixes with next hop nh (ORIGIN IGP, empty AS_PATH as iBGP,
// LOCAL_PREF 100) or withdraws them.
func updateMsg(nh netip.Addr, reach, unreach []netip.Prefix) []byte {
	attr := func(flags, typ byte, v []byte) []byte {
		if len(v) > 255 {
			flags |= bgpwire.FlagExtended
		}
		return bgpwire.Attr(flags, typ, v, -1)
	}
	var attrs []byte
	if len(reach) > 0 {
		a := nh.As16()
		mp := append([]byte{0, 2, 1, 16}, a[:]...)
		mp = append(mp, 0)
		mp = append(mp, bgpwire.NLRI(reach...)...)
		attrs = append(attrs, attr(0x40, 1, []byte{0})...)
		attrs = append(attrs, attr(0x40, 2, nil)...)
		attrs = append(attrs, attr(0x40, 5, []byte{0, 0, 0, 100})...)
		attrs = append(attrs, attr(0x80, 14, mp)...)
	}
	if len(unreach) > 0 {
		attrs = append(attrs, attr(0x80, 15, append([]byte{0, 2, 1}, bgpwire.NLRI(unreach...)...))...)
	}
	return bgpwire.Frame(bgpwire.MsgUpdate, bgpwire.UpdateRaw(0, nil, len(attrs), attrs, nil))
}

// unread is how much the reflector sent on conn that the kernel holds and we have not read.
func unread(conn net.Conn) int {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n
}
