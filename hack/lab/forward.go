package lab

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// forwarder makes the API server reachable from inside a node namespace without giving the root
// namespace an address on the lab's network: it listens on 127.0.0.1:6443 inside the node's
// namespace (the socket is created from a thread switched into it) and relays every connection
// to the API server from the root namespace.
type forwarder struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// APIPort is where the API server answers inside every node namespace.
const APIPort = "6443"

func startForwarder(netns, target string) (*forwarder, error) {
	f := &forwarder{target: target, conns: map[net.Conn]struct{}{}}
	err := inNetns(netns, func() error {
		var err error
		f.ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", APIPort))
		return err
	})
	if err != nil {
		return nil, err
	}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				slog.Warn("api forwarder accept", "err", err)
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

func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

func (f *forwarder) relay(in net.Conn) {
	defer f.wg.Done()
	defer f.untrack(in)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	var d net.Dialer
	// This goroutine is not locked to a thread: the dial happens in the root namespace.
	out, err := d.DialContext(ctx, "tcp", f.target)
	cancel()
	if err != nil {
		slog.Warn("api forwarder dial", "target", f.target, "err", err)
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

// Close stops listening and cuts every relayed connection (a node whose link is "cut" keeps its
// API connection: the control plane is not on the lab network).
func (f *forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.ln.Close()
	f.wg.Wait()
}
