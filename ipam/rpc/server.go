package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tabbynet/tabby/internal/unixsock"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// Server serves an api.Service on a unix socket, in api's wire format (api/wire.go), every
// method by its name. tabby-node builds it with NewServer(allocator):
//
//	l, _ := rpc.Listen(api.DefaultSocket)
//	srv := rpc.NewServer(alloc)
//	go srv.Serve(l)
//	defer srv.Stop()
type Server struct {
	methods api.Transport // the service's, called in this process
	log     *slog.Logger

	closing atomic.Bool
	mu      sync.Mutex
	ls      []net.Listener
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	calls   atomic.Int32
}

// NewServerFor serves any api.Service (tests serve fakes with it).
func NewServerFor(svc api.Service) *Server {
	return &Server{methods: api.InProcess(svc), log: slog.Default().With("component", "ipam-rpc"), conns: map[net.Conn]struct{}{}}
}

// Listen opens the service's socket (replacing a stale one), mode 0600.
func Listen(path string) (net.Listener, error) { return unixsock.Listen(path) }

// Serve answers connections on l until Stop (or l fails).
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	s.ls = append(s.ls, l)
	s.mu.Unlock()
	for {
		conn, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			conn.Close()
			return nil
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(conn)
	}
}

// InFlight is the number of calls running.
func (s *Server) InFlight() int { return int(s.calls.Load()) }

// Stop closes the listeners and the idle connections, and waits for the calls in flight (an
// Assign half done must not be cut between its writes).
func (s *Server) Stop() {
	s.closing.Store(true)
	s.mu.Lock()
	for _, l := range s.ls {
		_ = l.Close()
	}
	for c := range s.conns {
		// A connection waiting for its next request stops waiting; one in a call writes its
		// reply first, then finds the deadline passed.
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) serveConn(conn net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
		s.wg.Done()
	}()
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req api.Request
		var reply api.Reply
		if err := json.Unmarshal(line, &req); err != nil {
			reply = api.NewReply(nil, err)
		} else {
			reply = s.call(req)
		}
		out, err := json.Marshal(reply)
		if err != nil {
			return
		}
		if _, err := conn.Write(append(out, '\n')); err != nil {
			return
		}
	}
}

// call runs one request until the caller's deadline (at most callTimeout).
func (s *Server) call(req api.Request) api.Reply {
	s.calls.Add(1)
	defer s.calls.Add(-1)
	start := time.Now()
	deadline := start.Add(callTimeout)
	if !req.Deadline.IsZero() && req.Deadline.Before(deadline) {
		deadline = req.Deadline
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	out, err := api.Dispatch(ctx, s.methods, req.Method, req.Body)
	switch {
	case err != nil:
		s.log.Warn("ipam call failed", "method", req.Method, "key", subject(req.Body), "took", time.Since(start), "err", err)
	case s.log.Enabled(ctx, slog.LevelDebug): // spares every call a second decode of its body
		s.log.Debug("ipam call", "method", req.Method, "key", subject(req.Body), "took", time.Since(start))
	}
	return api.NewReply(out, err)
}

// callTimeout bounds one call on tabby-node's side.
const callTimeout = 60 * time.Second

// subject names a call's subject in logs: its handle, else its node (and network).
func subject(body json.RawMessage) string {
	var k struct {
		Handle, Node, Network string
	}
	_ = json.Unmarshal(body, &k)
	switch {
	case k.Handle != "":
		return k.Handle
	case k.Network != "":
		return k.Node + "/" + k.Network
	}
	return k.Node
}
