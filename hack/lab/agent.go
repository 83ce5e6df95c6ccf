package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/internal/netnsfwd"
	"github.com/tabbynet/tabby/internal/proc"
)

// Node is a lab node: a namespace on a subnet, with tabby-node running in it.
type Node struct {
	lab        *Lab
	Name       string
	Spec       NodeSpec
	NS         string       // network namespace
	Subnet     Subnet       //
	Addr       netip.Prefix // eth0's address, e.g. 198.51.100.11/25
	Addr6      netip.Prefix // eth0's IPv6 address, e.g. 2001:db8:100::11/64; invalid in an IPv4 lab
	Port       string       // the switch port (for CutLink)
	Dir        string       // per-node state: run dir, kubeconfig, log
	RunDir     string       // tabby-node's --run-dir: ipam.sock, bird.sock
	Kubeconfig string       // reaches the API server from inside NS
	LogPath    string
	// ObserveAddr reaches the node's observation endpoint from the root namespace (127.0.0.1:
	// PORT); tabby-node records it on its Node. Empty when the lab runs none.
	ObserveAddr string

	fwd        *netnsfwd.Forwarder
	observeFwd *netnsfwd.Forwarder
	// typhaFwd reach the tabby-typha replicas, by index (nil while the replica is down: a
	// connection is refused, as to a pod that is gone).
	typhaFwd []*netnsfwd.Forwarder

	mu     sync.Mutex
	agent  *proc.Proc // nil while tabby-node does not run
	last   *proc.Proc // the latest tabby-node started, running or not
	starts int
}

// IP is the node's underlay address.
func (n *Node) IP() netip.Addr { return n.Addr.Addr() }

// IP6 is the node's IPv6 underlay address, invalid in an IPv4 lab.
func (n *Node) IP6() netip.Addr { return n.Addr6.Addr() }

// NoBGP tells whether the node's tabby-node runs without BGP (Options.NoBGP, NodeSpec.NoBGP).
func (n *Node) NoBGP() bool { return n.lab.Opts.NoBGP || n.Spec.NoBGP }

// IPAMSocket is the socket the CNI plugin asks for addresses.
func (n *Node) IPAMSocket() string { return filepath.Join(n.RunDir, "ipam.sock") }

// BirdSocket is the socket `tabbyctl node status --socket` reads.
func (n *Node) BirdSocket() string { return filepath.Join(n.RunDir, "bird.sock") }

// Health ports are per namespace, so every node uses the DaemonSet's numbers.
const (
	HealthAddr  = "127.0.0.1:9099"
	MetricsAddr = "127.0.0.1:9091"
)

// AgentArgs are tabby-node's flags, as the chart's DaemonSet passes them.
func (n *Node) AgentArgs() []string {
	shutdown := n.Spec.Shutdown
	if shutdown == "" {
		shutdown = "restart"
	}
	args := []string{
		"--node-name=" + n.Name, "--namespace=" + Namespace, "--kubeconfig=" + n.Kubeconfig,
		"--run-dir=" + n.RunDir,
		// Both lab subnets: the node's own address is the one in it.
		"--bgp-address=cidr=198.51.100.0/24",
		// GoBGP's gRPC API off, as the chart installs it (node.gobgpAPI: "").
		"--health-addr=" + HealthAddr, "--metrics-addr=" + MetricsAddr, "--gobgp-api=",
		"--shutdown=" + shutdown, "--log-level=info",
		// Short IPAM GC timers so leaks (and a removed node's IPAM) are collected within a test.
		"--ipam-gc-interval=1s", "--ipam-gc-grace=3s",
	}
	if n.Addr6.IsValid() {
		args = append(args, "--bgp-address6="+nodeAddr6Method)
	}
	// Without BGP the BGP addresses above are still the node's underlay addresses: VXLAN's
	// outer source and destination.
	if n.NoBGP() {
		args = append(args, "--bgp=none")
	}
	if len(n.lab.Typhas) > 0 {
		var addrs []string
		for i := range n.lab.Typhas {
			addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(TyphaPort+i)))
		}
		args = append(args, "--typha-addr="+strings.Join(addrs, ","), "--typha-ca-file="+n.lab.typhaCA)
	}
	args = append(args, n.observeArgs()...)
	if n.lab.Opts.Families == IPv6Only {
		// tabby sees an IPv6-only node: no IPv4 BGP address (the lab's links keep theirs).
		args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--bgp-address=") })
		args = append(args, "--bgp-address=none")
	}
	return append(args, n.lab.Opts.AgentArgs...)
}

// Start starts tabby-node in the node's namespace and waits until /readyz answers 200.
func (n *Node) Start(ctx context.Context) error {
	if err := n.spawn(); err != nil {
		return err
	}
	return n.WaitReady(ctx)
}

func (n *Node) spawn() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agent != nil && n.agent.Running() {
		return fmt.Errorf("node %s: tabby-node already runs (pid %d)", n.Name, n.agent.Pid())
	}
	n.starts++
	bin := filepath.Join(n.lab.TabbyBin, "tabby-node")
	// `ip netns exec` execs the agent in place, so signals reach it. It dies with the lab.
	p, err := proc.Start("tabby-node", append([]string{"ip", "netns", "exec", n.NS, bin}, n.AgentArgs()...), proc.Options{
		Log: n.LogPath, Header: fmt.Sprintf("lab: start #%d of tabby-node", n.starts), Env: []string{"NODE_NAME=" + n.Name},
	})
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.agent, n.last = p, p
	return nil
}

// running is the agent's process while it runs, else nil.
func (n *Node) running() *proc.Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agent != nil && !n.agent.Running() {
		n.agent = nil
	}
	return n.agent
}

// Running tells whether tabby-node runs.
func (n *Node) Running() bool { return n.running() != nil }

// WaitReady polls the agent's /readyz (from inside the namespace) until it answers 200.
func (n *Node) WaitReady(ctx context.Context) error {
	timeout := n.lab.Opts.ReadyTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n.mu.Lock()
	started := n.last
	n.mu.Unlock()
	if started == nil {
		return fmt.Errorf("node %s: tabby-node was never started", n.Name)
	}
	exited := started.Exited()
	hc := n.httpClient()
	defer hc.CloseIdleConnections()
	var last string
	for {
		select {
		case <-exited:
			return fmt.Errorf("node %s: tabby-node exited before it was ready (%v); log tail:\n%s", n.Name, n.exitErr(), n.LogTail(40))
		default:
		}
		resp, err := hc.Get("http://" + HealthAddr + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: tabby-node not ready: %s; log tail:\n%s", n.Name, last, n.LogTail(40))
		case <-exited:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// httpClient reaches the agent's HTTP endpoints inside the node's namespace.
func (n *Node) httpClient() *http.Client { return n.httpClientTimeout(2 * time.Second) }

func (n *Node) httpClientTimeout(d time.Duration) *http.Client {
	return &http.Client{Timeout: d, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, n.NS, addr) },
	}}
}

// Metrics returns the agent's Prometheus metrics text (its --metrics-addr, inside the node's
// namespace).
func (n *Node) Metrics(ctx context.Context) (string, error) {
	b, err := n.MetricsPath(ctx, "/metrics")
	return string(b), err
}

// MetricsPath GETs path on the agent's metrics address (/debug/pprof/heap with --pprof); a CPU
// profile takes as long as it asks for.
func (n *Node) MetricsPath(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+MetricsAddr+path, nil)
	if err != nil {
		return nil, err
	}
	// Each call has a client of its own: its kept-alive connection is closed with it, or it
	// stays open (a descriptor in the agent) for as long as the agent runs.
	hc := n.httpClientTimeout(time.Minute)
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("node %s: %s: %w", n.Name, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %s: %s: %s", n.Name, path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// PID is the running agent's process ID (0 when it does not run).
func (n *Node) PID() int {
	if p := n.running(); p != nil {
		return p.Pid()
	}
	return 0
}

func (n *Node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last == nil {
		return nil
	}
	return n.last.Err()
}

// signal sends sig to the agent and waits up to wait for it to exit (then SIGKILL).
func (n *Node) signal(sig syscall.Signal, wait time.Duration) error {
	p := n.running()
	if p == nil {
		return nil
	}
	if err := p.Stop(sig, wait); err != nil {
		return fmt.Errorf("node %s: %w; log tail:\n%s", n.Name, err, n.LogTail(20))
	}
	return nil
}

// Stop sends SIGTERM (tabby-node's configured shutdown: restart-style by default) and waits.
func (n *Node) Stop(ctx context.Context) error { return n.signal(syscall.SIGTERM, 20*time.Second) }

// Kill sends SIGKILL: a crash.
func (n *Node) Kill() error { return n.signal(syscall.SIGKILL, 10*time.Second) }

// Restart stops tabby-node with SIGTERM and starts it again, waiting until it is ready.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.Stop(ctx); err != nil {
		return err
	}
	return n.Start(ctx)
}

func (n *Node) killAgent() {
	_ = n.signal(syscall.SIGKILL, 5*time.Second)
}

// teardown removes everything of the node (the agent must be stopped or it is killed).
func (n *Node) teardown(ctx context.Context) {
	n.killAgent()
	n.mu.Lock()
	for _, f := range n.typhaFwd {
		if f != nil {
			f.Close()
		}
	}
	n.typhaFwd = nil
	n.mu.Unlock()
	if n.fwd != nil {
		n.fwd.Close()
		n.fwd = nil
	}
	if n.observeFwd != nil {
		n.observeFwd.Close()
		n.observeFwd = nil
	}
	_ = delNetns(ctx, n.NS)
}

// LogTail is the last lines of the agent's log.
func (n *Node) LogTail(lines int) string { return TailFile(n.LogPath, lines) }

// TailFile is the last lines of a file (its error's text if it cannot be read).
func TailFile(path string, lines int) string { return proc.Tail(path, lines) }
