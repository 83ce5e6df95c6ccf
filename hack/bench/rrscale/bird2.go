package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
)

// birdRR is one BIRD2 reflector in a reflector node's namespace.
type birdRR struct{ *benchutil.BIRD2 }

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
		birds[i] = &birdRR{&benchutil.BIRD2{Node: n, Dir: dir}}
		if err := birds[i].writeConfig(w, i); err != nil {
			r.err = err
			return r
		}
	}
	t0 := time.Now()
	for _, b := range birds {
		if err := b.Start(); err != nil {
			r.err = errors.Join(err, stopBirds(birds))
			return r
		}
	}
	pids := func() []int {
		var out []int
		for _, b := range birds {
			out = append(out, b.Pid())
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
	if r.err == nil {
		r.status, r.err = timeCalls(ctx, "BIRD2 status", birds[0].status)
	}
	if r.err != nil {
		r.err = fmt.Errorf("%w%s", r.err, birds[0].LogTail())
	}
	t1 := time.Now()
	r.stopErr = stopBirds(birds)
	r.stopped = time.Since(t1)
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
`, peers.RouterID(model.Node{Name: b.Node.Name}), me, asn, int(w.o.hold9().Seconds()), int(w.o.hold9().Seconds())/3, rrClusterID)
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
	return os.WriteFile(b.Path(".conf"), []byte(s.String()), 0o644)
}

// status is the operator's look at the daemon's sessions, with their routes imported and
// exported.
func (b *birdRR) status(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "birdc", "-s", b.Path(".ctl"), "show", "protocols", "all").CombinedOutput()
	if err != nil {
		return fmt.Errorf("birdc show protocols all: %w: %s", err, out)
	}
	if !bytes.Contains(out, []byte("Routes:")) {
		return fmt.Errorf("birdc show protocols all shows no routes: %.200s", out)
	}
	return nil
}

// stopBirds ends every daemon (SIGTERM, then SIGKILL) and waits for it.
func stopBirds(birds []*birdRR) error {
	var bs []*benchutil.BIRD2
	for _, b := range birds {
		if b != nil {
			bs = append(bs, b.BIRD2)
		}
	}
	return benchutil.StopBIRD2(bs, 10*time.Second)
}
