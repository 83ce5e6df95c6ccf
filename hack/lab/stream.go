package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
)

// StreamServer is a TCP echo server in a pod's namespace, on both families, that echoes
// everything a connection sends until the client closes it: one connection can live as long
// as a test needs (the probe servers answer one line and close).
type StreamServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

// StartStreamServer listens on port, IPv4 and IPv6, inside netns until Close.
func StartStreamServer(netns string, port uint16) (*StreamServer, error) {
	s := &StreamServer{conns: map[net.Conn]bool{}}
	err := inNetns(netns, func() error {
		var err error
		s.ln, err = net.Listen("tcp", fmt.Sprintf("[::]:%d", port))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream server on %d in %s: %w", port, netns, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return // closed
			}
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_, _ = io.Copy(c, c)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
		}
	}()
	return s, nil
}

// Close stops listening and ends the connections.
func (s *StreamServer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// DialTCP connects to dst from inside netns.
func DialTCP(ctx context.Context, netns string, dst netip.AddrPort) (net.Conn, error) {
	return dialIn(ctx, netns, dst.String())
}
