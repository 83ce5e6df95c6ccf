package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/hack/lab"
)

// birdRR is one BIRD2 reflector in a reflector node's namespace.
type birdRR struct {
	node   *lab.Node
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// bird2Phase runs BIRD2 as both reflectors in the same namespaces, with the same cluster ID,
// timers, clients and kernel export as tabby, and measures the same figures.
func (w *world) bird2Phase(ctx context.Context) (r result) {
	if _, err := exec.LookPath("bird"); err != nil {
		r.err = fmt.Errorf("BIRD2 not installed (apt-get install bird2): %w", err)
		return r
	}
	dir := filepath.Join(w.lab.Dir, "bird2") // removed with the lab
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.err = err
		return r
	}
	birds := make([]*birdRR, len(w.rrs))
	for i, n := range w.rrs {
		birds[i] = &birdRR{node: n, dir: dir}
		if err := birds[i].writeConfig(w, i); err != nil {
			r.err = err
			return r
		}
	}
	t0 := time.Now()
	for _, b := range birds {
		if err := b.start(); err != nil {
			r.err = errors.Join(err, stopBirds(birds))
			return r
		}
	}
	pids := func() []int {
		var out []int
		for _, b := range birds {
			out = append(out, b.cmd.Process.Pid)
		}
		return out
	}
	r.err = w.converge(ctx, t0, pids, &r)
	if r.err == nil {
		r.err = w.idle(ctx, pids(), &r)
	}
	if r.err == nil {
		r.err = w.samples(ctx, &r)
	}
	if r.err != nil {
		r.err = fmt.Errorf("%w%s", r.err, birds[0].logTail())
	}
	r.stopErr = stopBirds(birds)
	return r
}

// writeConfig mirrors tabby's reflector: clients with cluster ID, the sibling as a plain iBGP
// peer (as Calico's BIRD reflectors have it), tabby's hold and keepalive times, the lower address
// dialling, and every learned route into the kernel as felix installs them.
func (b *birdRR) writeConfig(w *world, self int) error {
	var s strings.Builder
	me := w.rrAddrs[self]
	fmt.Fprintf(&s, `router id %s;
protocol device { scan time 10; }
protocol kernel { ipv6 { export all; }; }
template bgp common {
	local %s as %d;
	direct; connect delay time 1; connect retry time 1; hold time %d; keepalive time %d;
	ipv6 { import all; export all; };
}
template bgp rrclient from common {
	rr client; rr cluster id %s;
}
`, peers.RouterID(peers.Node{Name: b.node.Name}), me, asn, int(w.o.hold9().Seconds()), int(w.o.hold9().Seconds())/3, rrClusterID)
	for j, a := range w.rrAddrs {
		if j == self {
			continue
		}
		passive := ""
		if me.Compare(a) > 0 {
			passive = " passive on;"
		}
		fmt.Fprintf(&s, "protocol bgp sibling%d from common { neighbor %s as %d;%s }\n", j+1, a, asn, passive)
	}
	for i, a := range w.clients {
		fmt.Fprintf(&s, "protocol bgp c%d from rrclient { neighbor %s as %d; }\n", i+1, a, asn)
	}
	return os.WriteFile(b.path(".conf"), []byte(s.String()), 0o644)
}

func (b *birdRR) path(ext string) string { return filepath.Join(b.dir, b.node.Name+ext) }

func (b *birdRR) start() error {
	logf, err := os.Create(b.path(".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("ip", "netns", "exec", b.node.NS, "bird", "-f", "-c", b.path(".conf"), "-s", b.path(".ctl"), "-P", b.path(".pid"))
	cmd.Stdout, cmd.Stderr = logf, logf
	// The lab kills whatever is left in its namespaces too; this covers the bench dying first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start BIRD2 in %s: %w", b.node.NS, err)
	}
	b.cmd, b.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(b.exited) }()
	return nil
}

func (b *birdRR) logTail() string {
	out, err := os.ReadFile(b.path(".log"))
	if err != nil || len(out) == 0 {
		return ""
	}
	return "; " + b.node.Name + " log: " + strings.TrimSpace(string(out[max(0, len(out)-1000):]))
}

// stopBirds ends every daemon (SIGTERM, then SIGKILL) and waits for it.
func stopBirds(birds []*birdRR) error {
	var errs []error
	for _, b := range birds {
		if b != nil && b.cmd != nil {
			_ = b.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, b := range birds {
		if b == nil || b.cmd == nil {
			continue
		}
		select {
		case <-b.exited:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
			errs = append(errs, fmt.Errorf("BIRD2 at %s ignored SIGTERM: killed", b.node.Name))
		}
	}
	return errors.Join(errs...)
}
