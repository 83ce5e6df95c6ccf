package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/hack/lab"
)

// tabbyPhase starts both reflectors' tabby-node at once (their N clients are already in the
// API server and the injector listens), measures convergence, idle cost and new blocks, and
// stops them again.
func (w *world) tabbyPhase(ctx context.Context) (r result) {
	t0 := time.Now()
	var wg sync.WaitGroup
	startErr := make([]error, len(w.rrs))
	for i, n := range w.rrs {
		wg.Add(1)
		go func() { defer wg.Done(); startErr[i] = n.Start(ctx) }()
	}
	var prof chan error
	if w.o.profile != "" {
		prof = make(chan error, 1)
		// From the start on: the convergence is where the time goes.
		go func() {
			prof <- w.profile(ctx, w.rrs[0], "profile?seconds="+strconv.Itoa(int(w.o.profileFor.Seconds())), w.o.profile)
		}()
	}
	pids := func() []int {
		var out []int
		for _, n := range w.rrs {
			out = append(out, n.PID())
		}
		return out
	}
	r.err = w.converge(ctx, t0, pids, &r)
	wg.Wait()
	for i, err := range startErr {
		// Readiness waits for felix, which waits for every client's End-of-RIB: a reflector
		// still converging after the lab's minute is slow, not broken, and is measured on.
		if err != nil && w.rrs[i].Running() {
			r.notes = append(r.notes, fmt.Sprintf("%s not ready within the lab's minute (felix waits for every peer's End-of-RIB)", w.rrs[i].Name))
			startErr[i] = nil
		}
	}
	if err := errors.Join(startErr...); err != nil {
		r.err = errors.Join(r.err, err)
	}
	if r.err == nil {
		r.err = w.idle(ctx, pids(), &r)
	}
	if r.err == nil && w.o.heapProfile != "" {
		// What the reflector holds once converged and idle.
		if err := w.profile(ctx, w.rrs[0], "heap?gc=1", w.o.heapProfile); err != nil {
			fmt.Fprintln(os.Stderr, "heap profile:", err)
		}
		// The same as text, with the runtime's figures (stacks, heap returned to the kernel).
		if err := w.profile(ctx, w.rrs[0], "heap?debug=1", w.o.heapProfile+".txt"); err != nil {
			fmt.Fprintln(os.Stderr, "heap profile:", err)
		}
		if err := w.profile(ctx, w.rrs[0], "goroutine?debug=1", w.o.heapProfile+".goroutines.txt"); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine profile:", err)
		}
	}
	if r.err == nil {
		r.err = w.samples(ctx, &r)
	}
	if r.err == nil {
		r.status, r.err = timeCalls(ctx, "tabby status", func(ctx context.Context) error { return w.tabbyStatus(ctx, w.rrs[0]) })
	}
	if r.err == nil {
		r.scrape, r.err = timeCalls(ctx, "tabby metrics", func(ctx context.Context) error { _, err := w.rrs[0].Metrics(ctx); return err })
	}
	if prof != nil {
		if err := <-prof; err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
		}
	}
	if r.err != nil || r.missingBoth > 0 || r.resets > 0 {
		w.o.HoldFailed(ctx, w.lab, fmt.Sprintf("tabby: error %v; %d routes missing on some session; %d sessions reset", r.err, r.missingBoth, r.resets))
	}
	r.stopped, r.stopErr = w.stopTabby(ctx)
	return r
}

// stopTabby stops both agents (SIGTERM: the graceful, restart-style stop) and clears what they
// left for BIRD2: the routes they installed and the injector's sessions. It returns how long
// the agents took to exit.
func (w *world) stopTabby(ctx context.Context) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(w.rrs))
	t0 := time.Now()
	for i, n := range w.rrs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.Stop(ctx) }()
	}
	wg.Wait()
	took := time.Since(t0)
	for _, n := range w.rrs {
		if _, err := ipCmd(ctx, "", "-n", n.NS, "-6", "route", "flush", "proto", strconv.Itoa(v1.RouteProtocol)); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, w.quiesce(ctx))
	return took, errors.Join(errs...)
}

// profile fetches a profile of the node's tabby-node (--pprof; path: under /debug/pprof/) into
// file, retrying until the node serves it.
func (w *world) profile(ctx context.Context, n *lab.Node, path, file string) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		h, err := ns.GetNS(lab.NetnsPath(n.NS))
		if err != nil {
			return nil, err
		}
		defer h.Close()
		var c net.Conn
		err = h.Do(func(ns.NetNS) error {
			var d net.Dialer
			c, err = d.DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}}}
	url := "http://" + lab.MetricsAddr + "/debug/pprof/" + path
	var resp *http.Response
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err = hc.Do(req); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tabbyStatus asks the node's BGP status socket for its sessions, as `tabbyctl node status`
// does, and checks that it lists every client.
func (w *world) tabbyStatus(ctx context.Context, n *lab.Node) error {
	c, err := status.Dial(n.BirdSocket())
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Peers(ctx)
	if err != nil {
		return err
	}
	if len(r.Peers) < len(w.clients) {
		return fmt.Errorf("%s lists %d sessions, want at least %d", n.Name, len(r.Peers), len(w.clients))
	}
	return nil
}
