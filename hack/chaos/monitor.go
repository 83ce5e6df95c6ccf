package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// The monitor's traffic: what runs, unchanged, through every fault of a campaign and is read per
// fault window. Every exchange is recorded with the instant it started, so a window counts
// exactly the exchanges begun inside it.
const (
	// UDPInterval paces the UDP probes: 50 a second per pair.
	UDPInterval = 20 * time.Millisecond
	// ProbeInterval paces the long-lived connections' exchanges and the isolated pair's
	// connects: 20 a second each.
	ProbeInterval = 50 * time.Millisecond
	// probeTimeout is how long an isolated pair's connect may take before it counts as refused,
	// and a UDP answer before it counts as late.
	probeTimeout = time.Second
	// lostAfter is how long a UDP probe stays unanswered before it counts as lost. Longer than
	// probeTimeout: on a busy machine an answer may wait in a socket for the monitor's reader,
	// and a late answer is the machine's delay, not a packet the network lost.
	lostAfter = 3 * time.Second
	// tcpStallLimit is how long one exchange of a long-lived connection may wait for its echo
	// before the connection counts as broken (TCP retransmits through a short cut by itself).
	tcpStallLimit = 30 * time.Second
	// minShare is the share of the nominal number of exchanges a window must hold: fewer, and
	// the monitor did not run (a stuck sender) and its zero proves nothing.
	minShare = 0.25
)

// Kind is what a stream measures.
type Kind int

const (
	// UDPProbes are sequence-numbered request/response datagrams: a missing answer is a lost
	// packet (one way or the other).
	UDPProbes Kind = iota
	// TCPFlow is one long-lived connection exchanging a small message per interval: an error
	// on it (reset, closed, stalled past tcpStallLimit) is a broken connection.
	TCPFlow
	// Isolated are TCP connects to a server that policy isolates: a connect that succeeds is
	// wrongly allowed.
	Isolated
)

func (k Kind) String() string { return [...]string{"udp", "tcp", "isolated"}[k] }

// sample is one exchange: when it started, and how it ended (ok: answered, connected; done:
// ended at all, either way).
type sample struct {
	at       time.Time
	ok, done bool
	late     bool // a UDP answer that came after probeTimeout
}

// stream is one source of samples.
type stream struct {
	Name string
	Kind Kind

	mu      sync.Mutex
	samples []sample
	// resets are the instants a long-lived connection broke (TCPFlow).
	resets []time.Time
	last   error
}

// start records an exchange begun now and returns its index.
func (s *stream) start() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, sample{at: time.Now()})
	return len(s.samples) - 1
}

func (s *stream) end(i int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples[i].ok, s.samples[i].done = ok, true
}

// answer marks a UDP probe answered, unless its answer came too late to count.
func (s *stream) answer(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.samples) || s.samples[i].done {
		return
	}
	s.samples[i].ok, s.samples[i].done = true, true
	s.samples[i].late = time.Since(s.samples[i].at) > probeTimeout
}

func (s *stream) broke(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resets = append(s.resets, time.Now())
	s.last = err
}

// Monitor runs the streams until Stop.
type Monitor struct {
	streams []*stream
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []io.Closer
}

// Pair is a client pod and a server pod, on different nodes, and the address family to use.
type Pair struct {
	Client, Server *lab.Pod
	IPv6           bool
	// Service, if valid, is the ClusterIP of the pair's family of a Service whose one endpoint
	// is Server: the client talks to it, kube-proxy on the client's node translates.
	Service netip.Addr
}

// dst is where the server listens.
func (p Pair) dst(port uint16) netip.AddrPort {
	a := p.Server.IP
	if p.IPv6 {
		a = p.Server.IP6
	}
	return netip.AddrPortFrom(a, port)
}

// target is what the client sends to: the Service, or the server itself.
func (p Pair) target(port uint16) netip.AddrPort {
	if p.Service.IsValid() {
		return netip.AddrPortFrom(p.Service, port)
	}
	return p.dst(port)
}

// name is the pair as the table's notes name its streams.
func (p Pair) name() string {
	via := ""
	if p.Service.IsValid() {
		via = " via Service"
	}
	return fmt.Sprintf("%s→%s%s %s", p.Client.Name, p.Server.Name, via, p.family())
}

func (p Pair) family() string {
	if p.IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// Ports the monitor's servers listen on in the server pods.
const (
	UDPPort      = 7001
	TCPPort      = 7002
	isolatedPort = 7003
)

// StartMonitor starts, for every pair, UDP probes and a long-lived TCP connection, and for the
// isolated pair, connects that policy must refuse. The isolated server listens before this is
// called (ListenIsolated), so that a connect reaching it succeeds.
func StartMonitor(ctx context.Context, pairs, isolated []Pair) (*Monitor, error) {
	ctx, cancel := context.WithCancel(ctx)
	m := &Monitor{cancel: cancel}
	fail := func(err error) (*Monitor, error) { m.Stop(); return nil, err }
	for _, p := range pairs {
		name := p.name()
		udp := &stream{Name: "udp " + name, Kind: UDPProbes}
		if err := m.startUDP(ctx, udp, p); err != nil {
			return fail(err)
		}
		tcp := &stream{Name: "tcp " + name, Kind: TCPFlow}
		if err := m.startTCP(ctx, tcp, p); err != nil {
			return fail(err)
		}
		m.streams = append(m.streams, udp, tcp)
	}
	for _, p := range isolated {
		iso := &stream{Name: "isolated " + p.name(), Kind: Isolated}
		m.streams = append(m.streams, iso)
		m.wg.Add(1)
		go func() { defer m.wg.Done(); m.runIsolated(ctx, iso, p) }()
	}
	return m, nil
}

// Stop ends every stream and closes the servers.
func (m *Monitor) Stop() {
	m.cancel()
	for _, c := range m.closers {
		_ = c.Close()
	}
	m.wg.Wait()
}

func (m *Monitor) startUDP(ctx context.Context, s *stream, p Pair) error {
	dst := p.dst(UDPPort)
	network := "udp4"
	if p.IPv6 {
		network = "udp6"
	}
	var srv, cli *net.UDPConn
	if err := lab.InNetns(p.Server.NS, func() error {
		var err error
		srv, err = net.ListenUDP(network, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		return fmt.Errorf("%s: server: %w", s.Name, err)
	}
	m.closers = append(m.closers, srv)
	if err := lab.InNetns(p.Client.NS, func() error {
		var err error
		cli, err = net.DialUDP(network, nil, net.UDPAddrFromAddrPort(p.target(UDPPort)))
		return err
	}); err != nil {
		return fmt.Errorf("%s: client: %w", s.Name, err)
	}
	m.closers = append(m.closers, cli)
	// Room for every answer of a few seconds in which the reader does not run.
	for _, c := range []*net.UDPConn{srv, cli} {
		if err := c.SetReadBuffer(1 << 20); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	m.wg.Add(3)
	go func() {
		defer m.wg.Done()
		buf := make([]byte, 64)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			_, _ = srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	go func() {
		defer m.wg.Done()
		buf := make([]byte, 64)
		for {
			n, err := cli.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // an ICMP error on the connected socket: the probe stays unanswered
			}
			if n == 8 {
				s.answer(int(binary.BigEndian.Uint64(buf)))
			}
		}
	}()
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(UDPInterval)
		defer t.Stop()
		msg := make([]byte, 8)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			i := s.start()
			binary.BigEndian.PutUint64(msg, uint64(i))
			// A failed send (no route) is a lost probe like any other: it stays unanswered.
			_, _ = cli.Write(msg)
		}
	}()
	return nil
}

func (m *Monitor) startTCP(ctx context.Context, s *stream, p Pair) error {
	dst := p.dst(TCPPort)
	var ln net.Listener
	if err := lab.InNetns(p.Server.NS, func() error {
		var err error
		ln, err = net.Listen("tcp", dst.String())
		return err
	}); err != nil {
		return fmt.Errorf("%s: server: %w", s.Name, err)
	}
	m.closers = append(m.closers, ln)
	var conns sync.WaitGroup
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		defer conns.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				stop := context.AfterFunc(ctx, func() { _ = c.Close() })
				defer stop()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	connect := func() (net.Conn, error) {
		var c net.Conn
		err := lab.InNetns(p.Client.NS, func() error {
			d := net.Dialer{Timeout: 5 * time.Second}
			var err error
			c, err = d.DialContext(ctx, "tcp", p.target(TCPPort).String())
			return err
		})
		return c, err
	}
	first, err := connect()
	if err != nil {
		return fmt.Errorf("%s: connect: %w", s.Name, err)
	}
	go func() {
		defer m.wg.Done()
		c := first
		defer func() {
			if c != nil {
				c.Close()
			}
		}()
		stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
		t := time.NewTicker(ProbeInterval)
		defer t.Stop()
		msg, echo := make([]byte, 8), make([]byte, 8)
		for {
			select {
			case <-ctx.Done():
				stop()
				return
			case <-t.C:
			}
			if c == nil {
				// A broken connection is counted once; the monitor reconnects to go on
				// measuring, and the attempts in between are failed exchanges.
				i := s.start()
				nc, err := connect()
				if err != nil {
					s.end(i, false)
					continue
				}
				stop()
				c = nc
				stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
				s.end(i, true)
				continue
			}
			i := s.start()
			binary.BigEndian.PutUint64(msg, uint64(i))
			_ = c.SetDeadline(time.Now().Add(tcpStallLimit))
			_, err := c.Write(msg)
			if err == nil {
				_, err = io.ReadFull(c, echo)
			}
			if err == nil && string(echo) != string(msg) {
				err = fmt.Errorf("echo %x, sent %x", echo, msg)
			}
			if err != nil {
				s.end(i, false)
				if ctx.Err() != nil {
					return
				}
				s.broke(err)
				c.Close()
				c = nil
				continue
			}
			s.end(i, true)
		}
	}()
	return nil
}

// ListenIsolated starts the isolated pair's TCP server in its server pod: a connect that
// reaches it succeeds, so a probe that fails proves the policy, not a missing listener.
func ListenIsolated(p Pair) (io.Closer, error) {
	var ln net.Listener
	if err := lab.InNetns(p.Server.NS, func() error {
		var err error
		ln, err = net.Listen("tcp", p.dst(isolatedPort).String())
		return err
	}); err != nil {
		return nil, fmt.Errorf("isolated server: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln, nil
}

// ConnectIsolated makes one connect of the isolated pair: nil when it succeeds.
func ConnectIsolated(ctx context.Context, p Pair) error {
	var c net.Conn
	err := lab.InNetns(p.Client.NS, func() error {
		d := net.Dialer{Timeout: probeTimeout}
		var err error
		c, err = d.DialContext(ctx, "tcp", p.dst(isolatedPort).String())
		return err
	})
	if err != nil {
		return err
	}
	return c.Close()
}

// runIsolated starts a connect every interval, each on its own: a policy that drops makes
// every connect wait for its timeout, and the pace must not depend on that.
func (m *Monitor) runIsolated(ctx context.Context, s *stream, p Pair) {
	t := time.NewTicker(ProbeInterval)
	defer t.Stop()
	var attempts sync.WaitGroup
	defer attempts.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		i := s.start()
		attempts.Add(1)
		go func() {
			defer attempts.Done()
			err := ConnectIsolated(ctx, p)
			if ctx.Err() != nil && err != nil {
				return // stopped: neither refused nor allowed
			}
			s.end(i, err == nil)
		}()
	}
}

// StreamStats are one stream's counts over a window.
type StreamStats struct {
	Name string
	Kind Kind
	// Exchanges begun in the window, and how many of them failed (UDP: unanswered; TCP: failed
	// exchange) or, for the isolated pair, succeeded (wrongly allowed).
	Exchanges, Failed, Allowed int
	// Resets are the long-lived connection's breaks in the window.
	Resets int
	// Late are UDP probes answered, but after probeTimeout.
	Late int
	// FirstBad and LastBad are when the first and last failed (or allowed) exchanges of the
	// window began.
	FirstBad, LastBad time.Time
	// FirstGoodAfter is when the first exchange that succeeded after the window's last
	// failure began (zero if none did within the window).
	FirstGoodAfter time.Time
}

// Window are the counts of every stream over [from, to). It waits until every exchange begun
// before to has ended (answered or timed out).
func (m *Monitor) Window(ctx context.Context, from, to time.Time) ([]StreamStats, error) {
	wait := time.Until(to.Add(lostAfter + 200*time.Millisecond))
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(wait):
	}
	var out []StreamStats
	for _, s := range m.streams {
		st := StreamStats{Name: s.Name, Kind: s.Kind}
		s.mu.Lock()
		for _, x := range s.samples {
			if x.at.Before(from) || !x.at.Before(to) {
				continue
			}
			if !x.done && s.Kind != UDPProbes && time.Since(x.at) < tcpStallLimit+probeTimeout {
				// Still waiting on its echo (a stalled connection): judged by a later window.
				continue
			}
			st.Exchanges++
			if x.late {
				st.Late++
			}
			bad := !x.ok
			if s.Kind == Isolated {
				bad = x.ok
				if x.ok {
					st.Allowed++
				}
			} else if bad {
				st.Failed++
			}
			if bad {
				if st.FirstBad.IsZero() {
					st.FirstBad = x.at
				}
				st.LastBad = x.at
				st.FirstGoodAfter = time.Time{}
			} else if st.FirstGoodAfter.IsZero() && !st.LastBad.IsZero() {
				st.FirstGoodAfter = x.at
			}
		}
		for _, r := range s.resets {
			if !r.Before(from) && r.Before(to) {
				st.Resets++
			}
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out, nil
}

// CheckRan fails when a stream has fewer exchanges in a window of length d than it must have
// had if it ran: a monitor that did not run would otherwise report no loss.
func CheckRan(stats []StreamStats, d time.Duration) error {
	var errs []error
	for _, s := range stats {
		every := ProbeInterval
		if s.Kind == UDPProbes {
			every = UDPInterval
		}
		want := int(minShare * float64(d) / float64(every))
		if s.Exchanges < want {
			errs = append(errs, fmt.Errorf("%s: %d exchanges in %s, want at least %d: the monitor did not run", s.Name, s.Exchanges, d.Round(time.Millisecond), want))
		}
	}
	return errors.Join(errs...)
}
