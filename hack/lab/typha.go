package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/internal/netnsfwd"
	"github.com/tabbynet/tabby/internal/proc"
	"github.com/tabbynet/tabby/internal/promtext"
	"github.com/tabbynet/tabby/internal/testenv"
)

// TyphaPort is where a node reaches the first tabby-typha replica (the next ones: +1, +2).
const TyphaPort = 5473

// Typha is a tabby-typha replica of the lab, on the host: its ports stay the same across a
// restart, so the nodes' forwarders reach it again.
type Typha struct {
	Name                 string
	index                int
	lab                  *Lab
	API, Health, Metrics string // host:port on 127.0.0.1
	LogPath              string
	args                 []string
	bin                  string

	mu sync.Mutex
	p  *proc.Proc // nil while stopped
}

// startTyphas starts Options.Typha replicas with a certificate of the lab's making, and waits
// until each has synced.
func (l *Lab) startTyphas(ctx context.Context) error {
	if l.Opts.Typha == 0 {
		return nil
	}
	if l.Env == nil {
		return fmt.Errorf("tabby-typha in the lab needs the lab's own control plane")
	}
	dir := filepath.Join(l.Dir, "typha")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, cert, key, err := testenv.ServingCert(dir, "tabby-typha")
	if err != nil {
		return err
	}
	l.typhaCA = ca
	for i := range l.Opts.Typha {
		ports, err := testenv.FreePorts("127.0.0.1", 3)
		if err != nil {
			return err
		}
		addr := func(j int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[j])) }
		t := &Typha{Name: fmt.Sprintf("typha-%d", i), index: i, lab: l, API: addr(0), Health: addr(1), Metrics: addr(2),
			LogPath: filepath.Join(dir, fmt.Sprintf("typha-%d.log", i)), bin: filepath.Join(l.TabbyBin, "tabby-typha")}
		t.args = []string{"--kubeconfig=" + l.Kubecfg, "--listen=" + t.API, "--health-addr=" + t.Health, "--metrics-addr=" + t.Metrics,
			"--tls-cert-file=" + cert, "--tls-key-file=" + key}
		l.Typhas = append(l.Typhas, t)
		l.onClose(func(context.Context) error { t.Stop(); return nil })
		if err := t.start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// TyphaCA is the CA that issued the replicas' certificate (their name: tabby-typha).
func (l *Lab) TyphaCA() string { return l.typhaCA }

// forward makes the replica reachable from node n (at TyphaPort+index), if it runs.
func (t *Typha) forward(n *Node) error {
	fwd, err := startForwarder(n.NS, strconv.Itoa(TyphaPort+t.index), t.API)
	if err != nil {
		return fmt.Errorf("node %s: %s forwarder: %w", n.Name, t.Name, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.typhaFwd == nil { // torn down meanwhile
		fwd.Close()
		return nil
	}
	n.typhaFwd[t.index] = fwd
	return nil
}

// unforward closes the replica's forwarders: the nodes' connections to it are cut, and new ones
// refused, as when its pod is gone.
func (t *Typha) unforward() {
	for _, n := range t.lab.Nodes() {
		n.mu.Lock()
		var fwd *netnsfwd.Forwarder
		if t.index < len(n.typhaFwd) {
			fwd, n.typhaFwd[t.index] = n.typhaFwd[t.index], nil
		}
		n.mu.Unlock()
		if fwd != nil {
			fwd.Close()
		}
	}
}

// Start starts the replica and waits until /readyz answers 200 (every kind synced); the nodes
// reach it from then on.
func (t *Typha) Start(ctx context.Context) error {
	if err := t.start(ctx); err != nil {
		return err
	}
	for _, n := range t.lab.Nodes() {
		n.mu.Lock()
		up := n.typhaFwd != nil && n.typhaFwd[t.index] != nil
		n.mu.Unlock()
		if !up {
			if err := t.forward(n); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *Typha) start(ctx context.Context) error {
	t.mu.Lock()
	if t.p != nil {
		t.mu.Unlock()
		return fmt.Errorf("%s already runs", t.Name)
	}
	p, err := proc.Start(t.Name, append([]string{t.bin}, t.args...), proc.Options{Log: t.LogPath})
	if err != nil {
		t.mu.Unlock()
		return err
	}
	t.p = p
	t.mu.Unlock()
	done := p.Exited()

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + t.Health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before it was ready; log tail:\n%s", t.Name, TailFile(t.LogPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 30s; log tail:\n%s", t.Name, TailFile(t.LogPath, 20))
		}
	}
}

// Stop kills the replica (as a node failure would), waits for it to exit, and makes it
// unreachable from the nodes.
func (t *Typha) Stop() {
	t.unforward()
	t.mu.Lock()
	p := t.p
	t.p = nil
	t.mu.Unlock()
	_ = p.Stop(syscall.SIGKILL, time.Minute)
}

// Pid is the replica's process id, 0 when it does not run.
func (t *Typha) Pid() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p == nil {
		return 0
	}
	return t.p.Pid()
}

// Watches is how many watches of each resource (pods, ipamblocks, ...) the replica serves now.
func (t *Typha) Watches(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+t.Metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s metrics: %w", t.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	const name = "tabby_typha_watches"
	return promtext.ByLabel(promtext.Parse(string(body), name)[name], "resource"), nil
}
