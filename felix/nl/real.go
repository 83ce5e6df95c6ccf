package nl

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/internal/nlretry"
)

// Real is Handle over a netlink.Handle and a raw rtnetlink socket for batched writes, both
// opened in one network namespace.
type Real struct {
	*netlink.Handle
	ns netns.NsHandle // closed handle = the caller's namespace

	mu    sync.Mutex // guards the batch socket
	fd    int
	seq   uint32
	rbuf  []byte
	wbuf  []byte
	owned bool
}

// NewReal opens handles in the network namespace at nsPath ("" = the current one).
func NewReal(nsPath string) (*Real, error) {
	r := &Real{ns: netns.None()}
	if nsPath != "" {
		ns, err := netns.GetFromPath(nsPath)
		if err != nil {
			return nil, fmt.Errorf("open netns %s: %w", nsPath, err)
		}
		r.ns, r.owned = ns, true
	}
	// Routes, links and addresses only: with no protocol named, the library also opens XFRM and
	// netfilter sockets, and a kernel without xfrm_user then refuses the whole handle.
	h, err := netlink.NewHandleAt(r.ns, unix.NETLINK_ROUTE)
	if err != nil {
		r.closeNS()
		return nil, fmt.Errorf("netlink handle in netns %q: %w", nsPath, err)
	}
	r.Handle = h
	if r.fd, err = openBatchSocket(r.ns); err != nil {
		h.Close()
		r.closeNS()
		return nil, fmt.Errorf("netlink batch socket in netns %q: %w", nsPath, err)
	}
	r.rbuf = make([]byte, 1<<16)
	return r, nil
}

func (r *Real) closeNS() {
	if r.owned {
		r.ns.Close()
	}
}

// Close releases the sockets.
func (r *Real) Close() {
	r.Handle.Close()
	r.mu.Lock()
	unix.Close(r.fd)
	r.mu.Unlock()
	r.closeNS()
}

func openBatchSocket(ns netns.NsHandle) (int, error) {
	if ns.IsOpen() {
		// Sockets stay in the namespace they were created in: enter it just for socket().
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cur, err := netns.Get()
		if err != nil {
			return -1, err
		}
		defer cur.Close()
		if err := netns.Set(ns); err != nil {
			return -1, err
		}
		defer netns.Set(cur)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, err
	}
	// A whole batch of acks must fit; without CAP_ACK every error echoes its request.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	tv := unix.Timeval{Sec: 10}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// batchChunk bounds one sendmsg: the kernel handles the messages of one send in order and
// queues one ack each.
const batchChunk = 512

// RouteBatch sends the ops batchChunk at a time in one sendmsg each and collects the acks:
// the cost per route is the kernel's, not two syscalls and a Go round trip.
func (r *Real) RouteBatch(ops []RouteOp) []error {
	errs := make([]error, len(ops))
	r.mu.Lock()
	defer r.mu.Unlock()
	for start := 0; start < len(ops); start += batchChunk {
		end := min(start+batchChunk, len(ops))
		if err := r.sendChunk(ops[start:end], errs[start:end]); err != nil {
			for i := start; i < end; i++ {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

func (r *Real) sendChunk(ops []RouteOp, errs []error) error {
	r.wbuf = r.wbuf[:0]
	first := r.seq + 1
	for i, op := range ops {
		r.seq++
		msg, err := appendRouteMsg(r.wbuf, op, r.seq)
		if err != nil {
			errs[i] = err
			continue
		}
		r.wbuf = msg
	}
	if len(r.wbuf) == 0 {
		return nil
	}
	if err := unix.Sendto(r.fd, r.wbuf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	pending := 0
	for i := range ops {
		if errs[i] == nil {
			pending++
		}
	}
	answered := make([]bool, len(ops))
	for pending > 0 {
		n, _, err := unix.Recvfrom(r.fd, r.rbuf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return fmt.Errorf("netlink receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(r.rbuf[:n])
		if err != nil {
			return fmt.Errorf("netlink parse: %w", err)
		}
		for _, m := range msgs {
			idx := int(m.Header.Seq - first)
			if m.Header.Type != unix.NLMSG_ERROR || idx < 0 || idx >= len(ops) || answered[idx] {
				continue
			}
			answered[idx] = true
			pending--
			if len(m.Data) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 {
					errs[idx] = syscall.Errno(-code)
				}
			}
		}
	}
	return nil
}

// appendRouteMsg encodes one RTM_NEWROUTE (replace) or RTM_DELROUTE for an IPv4 or IPv6 route;
// the family is the destination's, and the gateway must be of the same family.
func appendRouteMsg(b []byte, op RouteOp, seq uint32) ([]byte, error) {
	rt := op.Route
	if rt.Dst == nil {
		return b, fmt.Errorf("route %v: no destination", rt)
	}
	family, dst, gw := uint8(unix.AF_INET), rt.Dst.IP.To4(), rt.Gw.To4()
	if dst == nil {
		family, dst, gw = unix.AF_INET6, rt.Dst.IP.To16(), rt.Gw.To16()
		if dst == nil {
			return b, fmt.Errorf("route %v: destination %q is not an IP address", rt, rt.Dst.IP)
		}
		if rt.Gw != nil && rt.Gw.To4() != nil {
			return b, fmt.Errorf("route %v: IPv4 gateway %s for an IPv6 destination", rt, rt.Gw)
		}
	} else if rt.Gw != nil && gw == nil {
		return b, fmt.Errorf("route %v: IPv6 gateway %s for an IPv4 destination", rt, rt.Gw)
	}
	start := len(b)
	typ, flags := uint16(unix.RTM_NEWROUTE), uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE)
	if op.Del {
		typ, flags = unix.RTM_DELROUTE, unix.NLM_F_REQUEST|unix.NLM_F_ACK
	}
	b = binary.NativeEndian.AppendUint32(b, 0) // length, patched below
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	ones, _ := rt.Dst.Mask.Size()
	table := rt.Table
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	rtmTable := uint8(unix.RT_TABLE_UNSPEC)
	if table < 256 {
		rtmTable = uint8(table)
	}
	scope, rtype := uint8(rt.Scope), uint8(rt.Type)
	if rtype == 0 && !op.Del {
		rtype = unix.RTN_UNICAST
	}
	if op.Del {
		// Let the kernel match any scope; type and protocol still narrow the match.
		scope = unix.RT_SCOPE_NOWHERE
	}
	b = append(b, family, uint8(ones), 0, uint8(rt.Tos), rtmTable, uint8(rt.Protocol), scope, rtype)
	b = binary.NativeEndian.AppendUint32(b, uint32(rt.Flags))
	b = appendAttr(b, unix.RTA_TABLE, binary.NativeEndian.AppendUint32(nil, uint32(table)))
	b = appendAttr(b, unix.RTA_DST, dst)
	if rt.Gw != nil {
		b = appendAttr(b, unix.RTA_GATEWAY, gw)
	}
	if len(rt.MultiPath) > 0 && !op.Del {
		mp, err := multipathAttr(rt, family == unix.AF_INET)
		if err != nil {
			return b[:start], err
		}
		b = appendAttr(b, unix.RTA_MULTIPATH, mp)
	}
	if rt.LinkIndex > 0 {
		b = appendAttr(b, unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, uint32(rt.LinkIndex)))
	}
	if rt.Priority > 0 {
		b = appendAttr(b, unix.RTA_PRIORITY, binary.NativeEndian.AppendUint32(nil, uint32(rt.Priority)))
	}
	binary.NativeEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b, nil
}

// multipathAttr is RTA_MULTIPATH's value: one struct rtnexthop (length, flags, hops, ifindex)
// per next hop, each followed by its RTA_GATEWAY. An IPv6 route's hops become siblings that the
// kernel lists as one multipath route again.
func multipathAttr(rt *netlink.Route, v4 bool) ([]byte, error) {
	var b []byte
	for _, h := range rt.MultiPath {
		gw := h.Gw.To16()
		if v4 {
			gw = h.Gw.To4()
		} else if h.Gw.To4() != nil {
			gw = nil
		}
		if gw == nil {
			return nil, fmt.Errorf("route %v: next hop %s is not of the destination's family", rt.Dst, h.Gw)
		}
		start := len(b)
		b = binary.NativeEndian.AppendUint16(b, 0) // length, patched below
		b = append(b, uint8(h.Flags), uint8(h.Hops))
		b = binary.NativeEndian.AppendUint32(b, uint32(h.LinkIndex))
		b = appendAttr(b, unix.RTA_GATEWAY, gw)
		binary.NativeEndian.PutUint16(b[start:], uint16(len(b)-start))
	}
	return b, nil
}

func appendAttr(b []byte, typ uint16, val []byte) []byte {
	l := 4 + len(val)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	for i := l; i%4 != 0; i++ {
		b = append(b, 0)
	}
	return b
}

// Subscribe streams route and link updates of the handle's namespace.
func (r *Real) Subscribe(done <-chan struct{}, routes chan<- netlink.RouteUpdate, links chan<- netlink.LinkUpdate, onErr func(error)) error {
	ns := r.ns
	if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{
		Namespace: &ns, ErrorCallback: onErr, ReceiveBufferSize: 16 << 20, ReceiveBufferForceSize: true,
	}); err != nil {
		return fmt.Errorf("subscribe to routes: %w", err)
	}
	if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{
		Namespace: &ns, ErrorCallback: onErr, ReceiveBufferSize: 4 << 20, ReceiveBufferForceSize: true,
	}); err != nil {
		return fmt.Errorf("subscribe to links: %w", err)
	}
	return nil
}

// LinkList lists links, repeating a dump that raced with a change (never a partial list).
func (r *Real) LinkList() ([]netlink.Link, error) {
	return nlretry.Dump(r.Handle.LinkList)
}

// AddrList lists addresses, repeating a dump that raced with a change.
func (r *Real) AddrList(l netlink.Link, family int) ([]netlink.Addr, error) {
	return nlretry.Dump(func() ([]netlink.Addr, error) { return r.Handle.AddrList(l, family) })
}
