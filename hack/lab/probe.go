package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// EchoServer is a UDP server in a namespace that answers every datagram with the source
// address it saw: how "the internet" tells whether a pod's traffic was masqueraded.
type EchoServer struct {
	conn *net.UDPConn
	Addr netip.AddrPort

	mu   sync.Mutex
	seen map[netip.Addr]bool
}

// udpNetwork is the UDP network of an address's family: a pod of an IPv6-only lab has no IPv4
// address to bind.
func udpNetwork(a netip.Addr) string {
	if a.Is4() {
		return "udp4"
	}
	return "udp6"
}

// StartEcho listens on addr inside netns until Close.
func StartEcho(netns string, addr netip.AddrPort) (*EchoServer, error) {
	s := &EchoServer{Addr: addr, seen: map[netip.Addr]bool{}}
	err := inNetns(netns, func() error {
		var err error
		s.conn, err = net.ListenUDP(udpNetwork(addr.Addr()), net.UDPAddrFromAddrPort(addr))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("echo server on %s in %s: %w", addr, netns, err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := s.conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed
			}
			s.mu.Lock()
			s.seen[from.Addr()] = true
			s.mu.Unlock()
			_, _ = s.conn.WriteToUDPAddrPort([]byte(from.Addr().String()), from)
		}
	}()
	return s, nil
}

// Saw tells whether a datagram from a came in.
func (s *EchoServer) Saw(a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[a]
}

// Sources are the addresses datagrams came from.
func (s *EchoServer) Sources() []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []netip.Addr
	for a := range s.seen {
		out = append(out, a)
	}
	return out
}

// SendUDP sends one datagram from inside netns to server, not waiting for an answer.
func SendUDP(netns string, server netip.AddrPort) error {
	return inNetns(netns, func() error {
		c, err := net.DialUDP(udpNetwork(server.Addr()), nil, net.UDPAddrFromAddrPort(server))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		return err
	})
}

// Close stops the server.
func (s *EchoServer) Close() error { return s.conn.Close() }

// SourceSeenBy sends a datagram from inside netns to an echo server and returns the source
// address the server saw. A reply that never comes (e.g. the server cannot route back to an
// unmasqueraded pod address) is an error.
func SourceSeenBy(ctx context.Context, netns string, server netip.AddrPort) (netip.Addr, error) {
	var conn *net.UDPConn
	err := inNetns(netns, func() error {
		var err error
		conn, err = net.DialUDP(udpNetwork(server.Addr()), nil, net.UDPAddrFromAddrPort(server))
		return err
	})
	if err != nil {
		return netip.Addr{}, err
	}
	defer conn.Close()
	deadline := time.Now().Add(time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte("who am i")); err != nil {
		return netip.Addr{}, err
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil {
		return netip.Addr{}, err
	}
	return netip.ParseAddr(strings.TrimSpace(string(buf[:n])))
}

// Peer is one BGP session as `tabbyctl node status` prints it.
type Peer struct {
	Address, Type, State, Info string
}

// Established tells whether the session is up.
// (INFO may carry GoBGP's detail after the state, e.g. "Established call set policy").
func (p Peer) Established() bool { return p.State == "up" || strings.HasPrefix(p.Info, "Established") }

// Peers parses `tabbyctl node status` for the node.
func (n *Node) Peers(ctx context.Context) ([]Peer, error) {
	out, err := n.NodeStatus(ctx)
	if err != nil {
		return nil, err
	}
	return ParsePeers(out)
}

// ParsePeers parses the output of `tabbyctl node status`: tabby-node running, and its BGP sessions.
func ParsePeers(out string) ([]Peer, error) {
	if !strings.Contains(out, "tabby-node is running") {
		return nil, errors.New("tabby-node is not running: " + out)
	}
	var ps []Peer
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 5 || cells[0] == "PEER ADDRESS" {
			continue
		}
		ps = append(ps, Peer{Address: cells[0], Type: cells[1], State: cells[2], Info: cells[4]})
	}
	return ps, nil
}

// WaitPeers waits until the node's established sessions are exactly the given addresses.
func (n *Node) WaitPeers(ctx context.Context, timeout time.Duration, want ...netip.Addr) error {
	return Eventually(ctx, timeout, func(ctx context.Context) error {
		ps, err := n.Peers(ctx)
		if err != nil {
			return err
		}
		got := map[string]bool{}
		for _, p := range ps {
			if p.Established() {
				got[p.Address] = true
			}
		}
		for _, w := range want {
			if !got[w.String()] {
				return fmt.Errorf("node %s: session to %s not established; sessions: %+v", n.Name, w, ps)
			}
			delete(got, w.String())
		}
		if len(got) > 0 {
			return fmt.Errorf("node %s: unexpected established sessions %v; sessions: %+v", n.Name, got, ps)
		}
		return nil
	})
}
