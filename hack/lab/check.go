package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

// Ping sends one echo request from a namespace and waits up to a second for the reply.
func Ping(ctx context.Context, fromNS string, to netip.Addr) error {
	_, err := nsExec(ctx, fromNS, "ping", "-n", "-q", "-c", "1", "-W", "1", to.String())
	return err
}

// PingDF sends one echo request of size bytes of payload with fragmentation prohibited (the
// path must carry the whole packet: the pod's MTU, the tunnel's, the underlay's) and waits up to
// a second for the reply.
func PingDF(ctx context.Context, fromNS string, to netip.Addr, size int) error {
	_, err := nsExec(ctx, fromNS, "ping", "-n", "-q", "-c", "1", "-W", "1", "-M", "do", "-s", fmt.Sprint(size), to.String())
	return err
}

// Endpoint is something that pings: a pod, a node, the router, the internet host.
type Endpoint struct {
	Name string
	NS   string
	IP   netip.Addr
}

// PodEndpoints are the lab's pods as ping endpoints.
func (l *Lab) PodEndpoints() []Endpoint {
	var es []Endpoint
	for _, p := range l.Pods() {
		es = append(es, p.Endpoint())
	}
	return es
}

// PodEndpoints6 are the lab's pods at their IPv6 addresses (none in an IPv4 lab).
func (l *Lab) PodEndpoints6() []Endpoint {
	var es []Endpoint
	for _, p := range l.Pods() {
		if p.IP6.IsValid() {
			es = append(es, p.Endpoint6())
		}
	}
	return es
}

// NodeEndpoints6 are the lab's nodes at their IPv6 addresses (none in an IPv4 lab).
func (l *Lab) NodeEndpoints6() []Endpoint {
	var es []Endpoint
	for _, n := range l.Nodes() {
		if n.Addr6.IsValid() {
			es = append(es, n.Endpoint6())
		}
	}
	return es
}

// NodeEndpoints are the lab's nodes as ping endpoints.
func (l *Lab) NodeEndpoints() []Endpoint {
	var es []Endpoint
	for _, n := range l.Nodes() {
		es = append(es, Endpoint{Name: n.Name, NS: n.NS, IP: n.IP()})
	}
	return es
}

// Matrix is the outcome of pinging every destination from every source.
type Matrix struct {
	From, To []Endpoint
	OK       [][]bool
}

// Failures lists the pairs that did not answer.
func (m *Matrix) Failures() []string {
	var f []string
	for i, s := range m.From {
		for j, d := range m.To {
			if s.IP != d.IP && !m.OK[i][j] {
				f = append(f, fmt.Sprintf("%s(%s) -> %s(%s)", s.Name, s.IP, d.Name, d.IP))
			}
		}
	}
	return f
}

// String draws the matrix with ✔ and ✘.
func (m *Matrix) String() string {
	var b strings.Builder
	w := 8
	for _, s := range m.From {
		w = max(w, len(s.Name)+1)
	}
	fmt.Fprintf(&b, "%-*s", w, "from\\to")
	for _, d := range m.To {
		fmt.Fprintf(&b, " %-*s", max(len(d.Name), 2), d.Name)
	}
	b.WriteString("\n")
	for i, s := range m.From {
		fmt.Fprintf(&b, "%-*s", w, s.Name)
		for j, d := range m.To {
			mark := "✘"
			if s.IP == d.IP {
				mark = "·"
			} else if m.OK[i][j] {
				mark = "✔"
			}
			fmt.Fprintf(&b, " %-*s", max(len(d.Name), 2), mark)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// PingMatrix pings every destination from every source (up to 16 at a time), retrying the
// failed pairs until all answer or ctx ends. It returns the last matrix either way.
func PingMatrix(ctx context.Context, from, to []Endpoint) *Matrix {
	m := &Matrix{From: from, To: to, OK: make([][]bool, len(from))}
	for i := range m.OK {
		m.OK[i] = make([]bool, len(to))
	}
	for {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		var mu sync.Mutex
		for i, s := range from {
			for j, d := range to {
				if s.IP == d.IP || m.OK[i][j] {
					continue
				}
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					ok := Ping(ctx, s.NS, d.IP) == nil
					mu.Lock()
					m.OK[i][j] = ok
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		if len(m.Failures()) == 0 || ctx.Err() != nil {
			return m
		}
		select {
		case <-ctx.Done():
			return m
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Route is one kernel route, as `ip -j route` shows it.
type Route struct {
	Dst      string   `json:"dst"`
	Gateway  string   `json:"gateway,omitempty"`
	Dev      string   `json:"dev,omitempty"`
	Type     string   `json:"type,omitempty"`
	Protocol string   `json:"protocol,omitempty"`
	Scope    string   `json:"scope,omitempty"`
	Flags    []string `json:"flags,omitempty"`
}

func (r Route) String() string {
	s := r.Dst
	if r.Type != "" && r.Type != "unicast" {
		s = r.Type + " " + s
	}
	if r.Gateway != "" {
		s += " via " + r.Gateway
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	for _, f := range r.Flags {
		s += " " + f
	}
	return s
}

// Routes lists the IPv4 routes of a namespace's main table; proto 0 means all.
func Routes(ctx context.Context, netns string, proto int) ([]Route, error) {
	return routes(ctx, "-4", netns, proto)
}

// Routes6 lists the IPv6 routes of a namespace's main table; proto 0 means all.
func Routes6(ctx context.Context, netns string, proto int) ([]Route, error) {
	return routes(ctx, "-6", netns, proto)
}

func routes(ctx context.Context, family, netns string, proto int) ([]Route, error) {
	args := []string{family, "-j", "-n", netns, "route", "show"}
	if proto != 0 {
		args = append(args, "proto", fmt.Sprint(proto))
	}
	out, err := ip(ctx, args...)
	if err != nil {
		return nil, err
	}
	var rs []Route
	if strings.TrimSpace(out) == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		return nil, fmt.Errorf("parse ip -j route of %s: %w", netns, err)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].String() < rs[j].String() })
	return rs, nil
}

// TabbyRoutes are the routes tabby programmed (protocol 201) in the node's namespace.
func (n *Node) TabbyRoutes(ctx context.Context) ([]Route, error) {
	return Routes(ctx, n.NS, v1.RouteProtocol)
}

// TabbyRoutes6 are the IPv6 routes tabby programmed in the node's namespace.
func (n *Node) TabbyRoutes6(ctx context.Context) ([]Route, error) {
	return Routes6(ctx, n.NS, v1.RouteProtocol)
}

// RouteStrings renders routes one per line, sorted.
func RouteStrings(rs []Route) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	sort.Strings(out)
	return out
}

// Eventually polls cond every 100 ms until it returns nil or the timeout passes; the error is
// cond's last.
func Eventually(ctx context.Context, timeout time.Duration, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = cond(ctx); last == nil {
			return nil
		}
		var stop stopError
		if errors.As(last, &stop) {
			return stop.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop makes Eventually return err at once: waiting longer cannot help (the process that would
// make the condition true has exited).
func Stop(err error) error { return stopError{err} }

type stopError struct{ error }

// Exec runs a command inside the pod.
func (p *Pod) Exec(ctx context.Context, args ...string) (string, error) {
	return nsExec(ctx, p.NS, args...)
}

// Exec runs a command inside the node's namespace.
func (n *Node) Exec(ctx context.Context, args ...string) (string, error) {
	return nsExec(ctx, n.NS, args...)
}

// Endpoint of the pod.
func (p *Pod) Endpoint() Endpoint { return Endpoint{Name: p.Key(), NS: p.NS, IP: p.IP} }

// Endpoint6 is the pod at its IPv6 address.
func (p *Pod) Endpoint6() Endpoint { return Endpoint{Name: p.Key(), NS: p.NS, IP: p.IP6} }

// Endpoint of the node.
func (n *Node) Endpoint() Endpoint { return Endpoint{Name: n.Name, NS: n.NS, IP: n.IP()} }

// Endpoint6 is the node at its IPv6 address.
func (n *Node) Endpoint6() Endpoint { return Endpoint{Name: n.Name, NS: n.NS, IP: n.IP6()} }
