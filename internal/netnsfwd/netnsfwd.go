// Package netnsfwd makes a service of the test machine (the API server on loopback) reachable from
// inside a network namespace without giving the machine's own namespace an address on the test
// network: the caller creates a listener inside the namespace (a socket belongs to the namespace
// of the thread that creates it), and every accepted connection is relayed from the caller's
// namespace to the target.
package netnsfwd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Forwarder relays the connections of one listener to one target.
type Forwarder struct {
	ln     net.Listener
	target string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// Serve relays every connection ln accepts to target (host:port) until Close.
func Serve(ln net.Listener, target string) *Forwarder {
	return ServeDial(ln, target, nil)
}

// ServeDial is Serve with the connections to target made by dial (nil: in the caller's
// namespace): the other way round, a listener of the caller's namespace relayed into a node's.
func ServeDial(ln net.Listener, target string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Forwarder {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	f := &Forwarder{ln: ln, target: target, dial: dial, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f
}

// Addr is the listening address, inside the namespace.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

func (f *Forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				slog.Warn("netns forwarder accept", "err", err)
			}
			return
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go f.relay(c)
	}
}

func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

func (f *Forwarder) relay(in net.Conn) {
	defer f.wg.Done()
	defer f.untrack(in)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	// This goroutine is not locked to a thread: a plain dial happens in the caller's namespace.
	out, err := f.dial(ctx, "tcp", f.target)
	cancel()
	if err != nil {
		slog.Warn("netns forwarder dial", "target", f.target, "err", err)
		return
	}
	if !f.track(out) {
		out.Close()
		return
	}
	defer f.untrack(out)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done // one direction ended: close both (deferred), which ends the other
}

// Close stops listening and cuts every relayed connection.
func (f *Forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.ln.Close()
	f.wg.Wait()
}
