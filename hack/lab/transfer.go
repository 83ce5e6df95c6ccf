package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// TransferOptions say how much a bulk TCP transfer sends.
type TransferOptions struct {
	// Bytes to send; with Duration too, whichever ends first.
	Bytes int64
	// Duration: send for this long.
	Duration time.Duration
	// Verify: the receiver compares every byte with what was sent.
	Verify bool
	// Via is the address the sender connects to when something on the way translates it to
	// the receiver's (a DNAT, as a NodePort's); the receiver's own address when unset.
	Via netip.AddrPort
}

// Transfer is the outcome of one bulk TCP transfer.
type Transfer struct {
	Bytes int64
	// Elapsed is the receiver's: from the first byte to the end of the stream.
	Elapsed time.Duration
	// MSS is the sender's TCP maximum segment size: the path MTU the connection used, less
	// the IP and TCP headers.
	MSS int
}

// Gbps is the transfer's goodput in Gbit/s.
func (t Transfer) Gbps() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Bytes) * 8 / t.Elapsed.Seconds() / 1e9
}

func (t Transfer) String() string {
	return fmt.Sprintf("%d bytes in %s (%.2f Gbit/s, MSS %d)", t.Bytes, t.Elapsed.Round(time.Millisecond), t.Gbps(), t.MSS)
}

// transferChunk is what the sender writes again and again; the receiver checks against it.
const transferChunk = 256 << 10

// SendTCP listens at dst inside toNS, connects from inside fromNS and sends a stream of
// full-size segments as o says: what a pod's large transfer does. It returns once the receiver
// has read the whole stream, with what the receiver counted; a stream cut short, stalled until
// ctx ends, or (with Verify) altered is an error.
func SendTCP(ctx context.Context, fromNS, toNS string, dst netip.AddrPort, o TransferOptions) (Transfer, error) {
	if o.Bytes <= 0 && o.Duration <= 0 {
		return Transfer{}, errors.New("transfer: neither Bytes nor Duration")
	}
	chunk := make([]byte, transferChunk)
	if _, err := rand.Read(chunk); err != nil {
		return Transfer{}, err
	}
	var ln net.Listener
	if err := inNetns(toNS, func() error {
		var err error
		ln, err = net.Listen("tcp", dst.String())
		return err
	}); err != nil {
		return Transfer{}, fmt.Errorf("transfer: listen on %s in %s: %w", dst, toNS, err)
	}
	defer ln.Close()
	type received struct {
		t   Transfer
		err error
	}
	got := make(chan received, 1)
	go func() {
		t, err := receive(ctx, ln, chunk, o.Verify)
		got <- received{t, err}
	}()

	via := dst
	if o.Via.IsValid() {
		via = o.Via
	}
	c, err := dialIn(ctx, fromNS, via.String())
	if err != nil {
		return Transfer{}, fmt.Errorf("transfer: connect to %s from %s: %w", via, fromNS, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	var sent int64
	var end time.Time
	if o.Duration > 0 {
		end = time.Now().Add(o.Duration)
	}
	for (o.Bytes <= 0 || sent < o.Bytes) && (end.IsZero() || time.Now().Before(end)) {
		b := chunk
		if o.Bytes > 0 && o.Bytes-sent < int64(len(b)) {
			b = b[:o.Bytes-sent]
		}
		n, err := c.Write(b)
		sent += int64(n)
		if err != nil {
			return Transfer{}, fmt.Errorf("transfer to %s: sent %d bytes: %w", dst, sent, err)
		}
	}
	mss, err := tcpMSS(c)
	if err != nil {
		return Transfer{}, err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return Transfer{}, fmt.Errorf("transfer to %s: close: %w", dst, err)
	}
	var r received
	select {
	case r = <-got:
	case <-ctx.Done():
		_ = ln.Close()
		r = <-got
	}
	if r.err != nil {
		return Transfer{}, fmt.Errorf("transfer to %s: sent %d bytes: %w", dst, sent, r.err)
	}
	if r.t.Bytes != sent {
		return Transfer{}, fmt.Errorf("transfer to %s: sent %d bytes, %d arrived", dst, sent, r.t.Bytes)
	}
	r.t.MSS = mss
	return r.t, nil
}

// receive accepts one connection and reads it to the end.
func receive(ctx context.Context, ln net.Listener, chunk []byte, verify bool) (Transfer, error) {
	c, err := ln.Accept()
	if err != nil {
		return Transfer{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 1<<20)
	var t Transfer
	var start time.Time
	for {
		n, err := c.Read(buf)
		if n > 0 && start.IsZero() {
			start = time.Now()
		}
		if verify && n > 0 && !matches(buf[:n], chunk, t.Bytes) {
			return t, fmt.Errorf("bytes %d to %d differ from what was sent", t.Bytes, t.Bytes+int64(n))
		}
		t.Bytes += int64(n)
		if errors.Is(err, io.EOF) {
			t.Elapsed = time.Since(start)
			return t, nil
		}
		if err != nil {
			return t, fmt.Errorf("after %d bytes: %w", t.Bytes, err)
		}
	}
}

// matches tells whether b, read at offset off of the stream, is what the sender wrote there:
// chunk over and over.
func matches(b, chunk []byte, off int64) bool {
	for len(b) > 0 {
		i := int(off % int64(len(chunk)))
		n := min(len(b), len(chunk)-i)
		if !bytes.Equal(b[:n], chunk[i:i+n]) {
			return false
		}
		b, off = b[n:], off+int64(n)
	}
	return true
}

func tcpMSS(c net.Conn) (int, error) {
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var mss int
	var serr error
	if err := raw.Control(func(fd uintptr) { mss, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) }); err != nil {
		return 0, err
	}
	return mss, serr
}

// RoundTrips exchanges one byte back and forth over one TCP connection from inside fromNS to a
// server at dst inside toNS for d, one request in flight at a time (netperf's TCP_RR), and
// returns how many round trips completed: the per-packet cost of a path rather than its bulk
// rate.
func RoundTrips(ctx context.Context, fromNS, toNS string, dst netip.AddrPort, d time.Duration) (int, error) {
	var ln net.Listener
	if err := inNetns(toNS, func() error {
		var err error
		ln, err = net.Listen("tcp", dst.String())
		return err
	}); err != nil {
		return 0, fmt.Errorf("round trips: listen on %s in %s: %w", dst, toNS, err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
		defer stop()
		b := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, b); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				served <- err
				return
			}
			if _, err := c.Write(b); err != nil {
				served <- err
				return
			}
		}
	}()
	c, err := dialIn(ctx, fromNS, dst.String())
	if err != nil {
		return 0, fmt.Errorf("round trips: connect to %s from %s: %w", dst, fromNS, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	_ = c.(*net.TCPConn).SetNoDelay(true)
	b := []byte{1}
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		if _, err := c.Write(b); err != nil {
			c.Close()
			return n, fmt.Errorf("round trips to %s: after %d: %w", dst, n, err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			c.Close()
			return n, fmt.Errorf("round trips to %s: after %d: %w", dst, n, err)
		}
	}
	if err := c.Close(); err != nil {
		return n, err
	}
	if err := <-served; err != nil {
		return n, fmt.Errorf("round trips to %s: server: %w", dst, err)
	}
	return n, nil
}
