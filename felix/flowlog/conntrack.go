package flowlog

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// nfnlgrpConntrackDestroy is NFNLGRP_CONNTRACK_DESTROY (linux/netfilter/nfnetlink.h).
const nfnlgrpConntrackDestroy = 3

// ctReader follows conntrack's DESTROY events of the current network namespace. Its socket is
// read in batches (drain) rather than by a goroutine waiting on it: one connection ending is
// one message, and a reader woken for each would cost a context switch a connection.
type ctReader struct {
	fd  int
	buf []byte
}

func openConntrack() (*ctReader, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("conntrack: open netlink socket: %w", err)
	}
	// Room for the events between two drains; an overflow loses events (those connections'
	// counts), not the subscription.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (nfnlgrpConntrackDestroy - 1)}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("conntrack: subscribe to destroy events: %w", err)
	}
	return &ctReader{fd: fd, buf: make([]byte, 1<<16)}, nil
}

// drain hands fn every event queued on the socket, without waiting for more.
func (r *ctReader) drain(fn func(ConnEvent)) error {
	for {
		n, _, err := unix.Recvfrom(r.fd, r.buf, unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("conntrack: read events: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(r.buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			var e conntrack.Event
			nm := netlink.Message{
				Header: netlink.Header{Length: m.Header.Len, Type: netlink.HeaderType(m.Header.Type),
					Flags: netlink.HeaderFlags(m.Header.Flags), Sequence: m.Header.Seq, PID: m.Header.Pid},
				Data: m.Data,
			}
			if e.Unmarshal(nm) != nil {
				continue
			}
			if ce, ok := connEvent(e); ok {
				fn(ce)
			}
		}
	}
}

// connEvent is e as the joiner takes it: the tuple the policy chains saw (the original source,
// the destination after DNAT: the reply's source), both directions' counters.
func connEvent(e conntrack.Event) (ConnEvent, bool) {
	if e.Flow == nil || e.Type != conntrack.EventDestroy {
		return ConnEvent{}, false
	}
	f := e.Flow
	ce := ConnEvent{
		Tuple: Tuple{
			Proto: f.TupleOrig.Proto.Protocol,
			Src:   f.TupleOrig.IP.SourceAddress, SrcPort: f.TupleOrig.Proto.SourcePort,
			Dst: f.TupleReply.IP.SourceAddress, DstPort: f.TupleReply.Proto.SourcePort,
		},
		Packets: f.CountersOrig.Packets + f.CountersReply.Packets,
		Bytes:   f.CountersOrig.Bytes + f.CountersReply.Bytes,
	}
	if !ce.Tuple.Dst.IsValid() {
		ce.Tuple.Dst, ce.Tuple.DstPort = f.TupleOrig.IP.DestinationAddress, f.TupleOrig.Proto.DestinationPort
	}
	return ce, true
}

func (r *ctReader) close() error { return unix.Close(r.fd) }
