package lab

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Probe servers and the probe client: what NetworkPolicy tests connect with. A server answers
// on a pod's container port from inside the pod's namespace; the client connects from inside
// another namespace and exchanges one line. Both are sockets of the test process (no process
// per probe), so a matrix of hundreds of probes takes a second or two.

// servers are one pod's probe servers.
type servers struct {
	closers []io.Closer
	wg      sync.WaitGroup
}

// startServers listens on every TCP and UDP port of ports inside netns. A port without a
// protocol is TCP, as in a Pod.
func startServers(netns string, ports []corev1.ContainerPort) (*servers, error) {
	s := &servers{}
	var tcp []*net.TCPListener
	var udp []*net.UDPConn
	seen := map[string]bool{}
	err := inNetns(netns, func() error {
		for _, p := range ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			id := fmt.Sprintf("%d/%s", p.ContainerPort, proto)
			if seen[id] {
				continue
			}
			seen[id] = true
			switch proto {
			case corev1.ProtocolTCP:
				ln, err := net.ListenTCP("tcp4", &net.TCPAddr{Port: int(p.ContainerPort)})
				if err != nil {
					return fmt.Errorf("probe server on %s: %w", id, err)
				}
				tcp = append(tcp, ln)
				s.closers = append(s.closers, ln)
			case corev1.ProtocolUDP:
				c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: int(p.ContainerPort)})
				if err != nil {
					return fmt.Errorf("probe server on %s: %w", id, err)
				}
				udp = append(udp, c)
				s.closers = append(s.closers, c)
			}
		}
		return nil
	})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("probe servers in %s: %w", netns, err)
	}
	for _, ln := range tcp {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.serveTCP(ln) }()
	}
	for _, c := range udp {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); serveUDP(c) }()
	}
	return s, nil
}

// serveTCP echoes the first line of every connection and closes it.
func (s *servers) serveTCP(ln *net.TCPListener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(io.LimitReader(c, 256)).ReadString('\n')
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, line)
		}()
	}
}

// serveUDP echoes every datagram to its sender.
func serveUDP(c *net.UDPConn) {
	buf := make([]byte, 512)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return // closed
		}
		_, _ = c.WriteToUDPAddrPort(buf[:n], from)
	}
}

func (s *servers) close() {
	for _, c := range s.closers {
		_ = c.Close()
	}
	s.wg.Wait()
}

// Probe exchanges one line with the probe server at dst from inside netns within timeout: over
// TCP it connects, sends a line and reads it back; over UDP it sends a datagram and waits for
// the echo. nil means the exchange completed; an error says what happened instead (refused,
// reset, timed out). SCTP is not supported (see SCTPSupport).
func Probe(ctx context.Context, netns string, dst netip.AddrPort, proto corev1.Protocol, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	msg, err := nonce()
	if err != nil {
		return err
	}
	var c net.Conn
	switch proto {
	case corev1.ProtocolTCP:
		c, err = dialIn(ctx, netns, dst.String())
	case corev1.ProtocolUDP:
		c, err = dialUDP(netns, dst)
	default:
		return fmt.Errorf("probe %s: protocol %q not supported", dst, proto)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	var got string
	if proto == corev1.ProtocolTCP {
		got, err = bufio.NewReader(c).ReadString('\n')
	} else {
		buf := make([]byte, 512)
		var n int
		n, err = c.Read(buf)
		got = string(buf[:n])
	}
	if err != nil {
		return err
	}
	if got != msg {
		return fmt.Errorf("probe %s/%s: answer %q, sent %q", dst, proto, strings.TrimSpace(got), strings.TrimSpace(msg))
	}
	return nil
}

func nonce() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "probe " + hex.EncodeToString(b) + "\n", nil
}

// Every UDP probe of one flow (source namespace, destination) leaves from a source port the
// flow has not used for 40000 probes. With the kernel's choice, a port reused within
// conntrack's UDP timeout (30 s, 120 s once answered) would match the entry an earlier,
// allowed probe left, and pass as "established" a datagram that policy now denies: the probe
// would report a leak that is conntrack's, not the policy's. TCP needs none of this: a SYN
// that meets a closed connection's entry starts a new one, which policy judges afresh.
const (
	udpSourceBase  = 20000
	udpSourceCount = 40000
)

type udpFlow struct {
	netns string
	dst   netip.AddrPort
}

var udpSource = struct {
	sync.Mutex
	next map[udpFlow]uint32
}{next: map[udpFlow]uint32{}}

func nextUDPSource(f udpFlow) (uint16, error) {
	udpSource.Lock()
	defer udpSource.Unlock()
	n, ok := udpSource.next[f]
	if !ok {
		b := make([]byte, 4)
		if _, err := rand.Read(b); err != nil {
			return 0, err
		}
		n = binary.BigEndian.Uint32(b) % udpSourceCount
	}
	udpSource.next[f] = (n + 1) % udpSourceCount
	return uint16(udpSourceBase + n), nil
}

// dialUDP makes a connected UDP socket inside netns from a fresh source port of the flow.
func dialUDP(netns string, dst netip.AddrPort) (*net.UDPConn, error) {
	var last error
	for range 8 {
		port, err := nextUDPSource(udpFlow{netns, dst})
		if err != nil {
			return nil, err
		}
		var c *net.UDPConn
		err = inNetns(netns, func() error {
			var err error
			c, err = net.DialUDP(udpNetwork(dst.Addr()), &net.UDPAddr{Port: int(port)}, net.UDPAddrFromAddrPort(dst))
			return err
		})
		if err == nil {
			return c, nil
		}
		// Another probe of the namespace holds the port right now: take the flow's next one.
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
		last = err
	}
	return nil, fmt.Errorf("udp probe to %s from %s: no free source port: %w", dst, netns, last)
}

// SCTPSupport tells whether the lab probes SCTP, and if not, why. It never does today: the
// lab has no SCTP client or server (Go's net has no SCTP). The reason names the kernel when
// the kernel has no SCTP either, as that is what a machine would have to change first.
func SCTPSupport() (bool, string) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, syscall.IPPROTO_SCTP)
	if err != nil {
		if errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.ESOCKTNOSUPPORT) {
			return false, "kernel has no SCTP"
		}
		return false, fmt.Sprintf("cannot make an SCTP socket: %v", err)
	}
	_ = syscall.Close(fd)
	return false, "the lab has no SCTP client or server"
}
