package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
)

// birdNode is one BIRD2 daemon in a lab node's namespace.
type birdNode struct {
	*benchutil.BIRD2
	statics []netip.Prefix
}

// bird2Run stops the cluster's tabby-node agents and measures BIRD2 doing the same propagation
// in the same namespaces and topology (full iBGP mesh, or the same nodes as reflectors with
// the same cluster ID), each daemon originating its blocks as static blackholes and installing
// what it learns into the kernel. up is the time from the daemons' start to every initial
// route in every kernel.
func bird2Run(ctx context.Context, c *cluster, blocks int) (res propagation, up time.Duration, err error) {
	if _, err := exec.LookPath("bird"); err != nil {
		return res, 0, fmt.Errorf("BIRD2 not installed (apt-get install bird2): %w", err)
	}
	if err := stopAgents(ctx, c.nodes); err != nil {
		return res, 0, err
	}
	dir := filepath.Join(c.lab.Dir, "bird2") // removed with the lab
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, 0, err
	}
	paths := map[string]string{}
	for _, n := range c.nodes {
		paths[n.Name] = lab.NetnsPath(n.NS)
	}
	w, err := benchutil.WatchRoutes(paths, unix.RTPROT_BIRD, lab.PodCIDR)
	if err != nil {
		return res, 0, err
	}
	defer w.Close()

	birds := make([]*birdNode, len(c.nodes))
	defer func() {
		if serr := stopBirds(birds); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	start := time.Now()
	for i, n := range c.nodes {
		b := &birdNode{BIRD2: &benchutil.BIRD2{Node: n, Dir: dir}, statics: []netip.Prefix{blockAt(200, i)}}
		if err := b.writeConfig(c.topo, c.nodes); err != nil {
			return res, 0, err
		}
		if err := b.Start(); err != nil {
			return res, 0, err
		}
		birds[i] = b
	}
	for i, b := range birds {
		if _, err := w.Arrived(ctx, 60*time.Second, blockAt(200, i), b.Node.IP(), othersThan(c.nodes, b.Node)); err != nil {
			return res, 0, fmt.Errorf("BIRD2 %s convergence: %w%s", c.topo.name, err, b.LogTail())
		}
	}
	up = time.Since(start)

	var added []netip.Prefix
	owners := map[netip.Prefix]*birdNode{}
	for k := range blocks {
		owner := birds[k%len(birds)]
		p := blockAt(210, k)
		owner.statics = append(owner.statics, p)
		added, owners[p] = append(added, p), owner
		if err := owner.writeConfig(c.topo, c.nodes); err != nil {
			return res, up, err
		}
		t0 := time.Now()
		if err := owner.Configure(ctx); err != nil {
			return res, up, err
		}
		got, err := w.Arrived(ctx, 10*time.Second, p, owner.Node.IP(), othersThan(c.nodes, owner.Node))
		if err != nil {
			return res, up, fmt.Errorf("BIRD2 static %s at %s: %w", p, owner.Node.Name, err)
		}
		res.last = append(res.last, spread(got, t0, &res.each))
	}
	// One static removed per reconfiguration, as tabby's blocks are deleted one at a time.
	for _, p := range added {
		owner := owners[p]
		owner.statics = slices.DeleteFunc(owner.statics, func(q netip.Prefix) bool { return q == p })
		if err := owner.writeConfig(c.topo, c.nodes); err != nil {
			return res, up, err
		}
		t0 := time.Now()
		if err := owner.Configure(ctx); err != nil {
			return res, up, err
		}
		got, err := w.Withdrawn(ctx, 10*time.Second, p, othersThan(c.nodes, owner.Node))
		if err != nil {
			return res, up, fmt.Errorf("BIRD2 static %s removed at %s: %w", p, owner.Node.Name, err)
		}
		res.gone = append(res.gone, spread(got, t0, &res.goneEach))
	}
	// The same statics again (not timed) for the bulk withdrawal.
	for _, p := range added {
		owners[p].statics = append(owners[p].statics, p)
	}
	for _, b := range birds {
		if len(b.statics) == 1 {
			continue
		}
		if err := b.writeConfig(c.topo, c.nodes); err != nil {
			return res, up, err
		}
		if err := b.Configure(ctx); err != nil {
			return res, up, err
		}
	}
	for _, p := range added {
		if _, err := w.Arrived(ctx, 20*time.Second, p, owners[p].Node.IP(), othersThan(c.nodes, owners[p].Node)); err != nil {
			return res, up, fmt.Errorf("BIRD2 static %s added again at %s: %w", p, owners[p].Node.Name, err)
		}
	}
	t1 := time.Now()
	for _, b := range birds {
		if len(b.statics) == 1 {
			continue
		}
		b.statics = b.statics[:1]
		if err := b.writeConfig(c.topo, c.nodes); err != nil {
			return res, up, err
		}
		if err := b.Configure(ctx); err != nil {
			return res, up, err
		}
	}
	if err := w.Gone(ctx, 20*time.Second, added); err != nil {
		return res, up, fmt.Errorf("BIRD2: routes after removing the statics: %w", err)
	}
	res.withdraw = time.Since(t1)
	return res, up, nil
}

func othersThan(nodes []*lab.Node, n *lab.Node) []string {
	var out []string
	for _, m := range nodes {
		if m != n {
			out = append(out, m.Name)
		}
	}
	return out
}

// stopAgents stops every tabby-node (all at once, as the lab does) so BIRD2 can take port 179.
func stopAgents(ctx context.Context, nodes []*lab.Node) error {
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.Stop(ctx) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop tabby-node before BIRD2: %w", err)
	}
	// A restart-style stop keeps tabby's routes (and a failed withdrawal may have left some):
	// clear them, or BIRD2's `learn` would pick them up and carry them into its BGP.
	for _, n := range nodes {
		if out, err := exec.CommandContext(ctx, "ip", "-n", n.NS, "route", "flush", "proto", strconv.Itoa(v1.RouteProtocol)).CombinedOutput(); err != nil {
			return fmt.Errorf("flush tabby routes in %s: %v: %s", n.NS, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// writeConfig renders the daemon's whole configuration; BIRD2 re-reads it on `configure`.
func (b *birdNode) writeConfig(t topo, nodes []*lab.Node) error {
	var s strings.Builder
	me := b.Node.IP()
	fmt.Fprintf(&s, `router id %s;
protocol device { scan time 10; }
protocol kernel { ipv4 { export all; }; learn; }
protocol static blocks {
	ipv4;
`, me)
	for _, p := range b.statics {
		fmt.Fprintf(&s, "\troute %s blackhole;\n", p)
	}
	fmt.Fprintf(&s, `}
template bgp mesh {
	local %s as 64512;
	direct; connect delay time 1; connect retry time 1;
	ipv4 { import all; export where net ~ [ 10.244.0.0/16+ ]; };
}
`, me)
	self := slices.Index(nodes, b.Node)
	for j, n := range nodes {
		extra := ""
		switch {
		case j == self:
			continue
		case t.rrs == 0, self < t.rrs && j < t.rrs: // mesh; reflectors among themselves
		case self < t.rrs: // a reflector towards its client
			extra = " rr client; rr cluster id " + rrClusterID + ";"
		case j >= t.rrs: // clients peer with reflectors only
			continue
		}
		fmt.Fprintf(&s, "protocol bgp %s from mesh { neighbor %s as 64512;%s }\n", strings.ReplaceAll(n.Name, "-", "_"), n.IP(), extra)
	}
	if err := os.WriteFile(b.Path(".conf"), []byte(s.String()), 0o644); err != nil {
		return fmt.Errorf("BIRD2 config for %s: %w", b.Node.Name, err)
	}
	return nil
}

// stopBirds ends every daemon (SIGTERM, then SIGKILL) and waits for it.
func stopBirds(birds []*birdNode) error {
	var bs []*benchutil.BIRD2
	for _, b := range birds {
		if b != nil {
			bs = append(bs, b.BIRD2)
		}
	}
	return benchutil.StopBIRD2(bs, 5*time.Second)
}
