package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/hack/lab"
)

// fanOut stands for agents the bench does not run: n watchers, each on a connection of its own
// as every tabby-node has, watching what the churn changes as tabby-node does (every IPAMBlock,
// as JSON; every Pod, as protobuf) and throwing the events away. What it measures is the API
// server's side of a thousand agents: every event sent to every agent.
type fanOut struct {
	bytes  atomic.Int64 // received by all watchers
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error // the first watch that failed or ended early
	conns  []*http.Client
}

// typhaConfig is a watcher's way to a tabby-typha replica, as an agent's: TLS to the name
// tabby-typha, the replica's address dialled.
func typhaConfig(l *lab.Lab, t *lab.Typha) *rest.Config {
	var d net.Dialer
	return &rest.Config{Host: "https://tabby-typha", BearerToken: l.Config.BearerToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: l.TyphaCA(), ServerName: "tabby-typha"},
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, t.API)
		}}
}

// startFanOut starts n watchers at cfg (the API server, or a tabby-typha: typha). Each watches
// from a recent resourceVersion (a list of one item), so that it is served from a watch cache,
// without the initial objects.
func startFanOut(ctx context.Context, cfg *rest.Config, typha bool, w *world, n int, what map[string]bool) (*fanOut, error) {
	blocks, err := w.client.IPAMBlocks().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("fan-out: list IPAMBlocks: %w", err)
	}
	pods, err := w.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("fan-out: list pods: %w", err)
	}
	var watches []struct{ path, accept string }
	if what["ipamblocks"] {
		watches = append(watches, struct{ path, accept string }{"/apis/tabby.dev/v1/ipamblocks?watch=1&allowWatchBookmarks=true&resourceVersion=" + url.QueryEscape(blocks.ResourceVersion), "application/json"})
	}
	if what["pods"] {
		accept := "application/vnd.kubernetes.protobuf;stream=watch"
		if typha {
			accept = "application/json" // what tabby-typha serves
		}
		watches = append(watches, struct{ path, accept string }{"/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" + url.QueryEscape(pods.ResourceVersion), accept})
	}
	wctx, cancel := context.WithCancel(ctx)
	f := &fanOut{cancel: cancel}
	for range n {
		c := rest.CopyConfig(cfg)
		// A function (a proxy, a dialer): client-go caches no transport for it, so each watcher
		// has a connection of its own.
		c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
		hc, err := rest.HTTPClientFor(c)
		if err != nil {
			f.stop()
			return nil, err
		}
		f.conns = append(f.conns, hc)
		for _, wa := range watches {
			req, err := http.NewRequestWithContext(wctx, http.MethodGet, cfg.Host+wa.path, nil)
			if err != nil {
				f.stop()
				return nil, err
			}
			req.Header.Set("Accept", wa.accept)
			f.wg.Go(func() { f.watch(hc, req) })
		}
	}
	return f, nil
}

func (f *fanOut) watch(hc *http.Client, req *http.Request) {
	resp, err := hc.Do(req)
	if err == nil {
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s", resp.Status)
		} else {
			_, err = io.Copy(counter{&f.bytes}, resp.Body)
			if err == nil {
				err = errors.New("the watch ended")
			}
		}
		resp.Body.Close()
	}
	if req.Context().Err() == nil {
		f.mu.Lock()
		if f.err == nil {
			f.err = fmt.Errorf("fan-out watch %s: %w", req.URL.Path, err)
		}
		f.mu.Unlock()
	}
}

// stop ends the watches, closes their connections (the runs after must not share the machine
// with a hundred idle TLS connections) and says whether one failed before.
func (f *fanOut) stop() error {
	f.cancel()
	f.wg.Wait()
	for _, hc := range f.conns {
		hc.CloseIdleConnections()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// received: bytes so far, all watchers.
func (f *fanOut) received() int64 { return f.bytes.Load() }

// counter counts what is written to it, and keeps nothing.
type counter struct{ n *atomic.Int64 }

func (c counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// measureFanOut runs a churn at rate without, then with, o.watchers more agents' watches, one
// after the other: the API server's CPU moves from run to run (after the faster churn, or the
// watched run before, it is still collecting its garbage), so each watched run is measured beside
// a run without them just before. With tabby-typha in the lab it does it twice: the watches on
// the API server, then on the first replica.
func measureFanOut(ctx context.Context, out io.Writer, p *probe, agents []*lab.Node, w *world, l *lab.Lab, o options, rate int) error {
	type target struct {
		name  string
		cfg   *rest.Config
		typha bool
	}
	targets := []target{{"the API server", l.Config, false}}
	if len(l.Typhas) > 0 {
		targets = append(targets, target{"tabby-typha", typhaConfig(l, l.Typhas[0]), true})
	}
	for _, tg := range targets {
		plain, err := measureChurn(ctx, p, agents, &churn{w: w, rate: rate}, o.window, nil)
		if err != nil {
			return fmt.Errorf("fan-out, without the watches: %w", err)
		}
		f, err := startFanOut(ctx, tg.cfg, tg.typha, w, o.watchers, o.watch)
		if err != nil {
			return err
		}
		b0 := f.received()
		t0 := time.Now()
		r, err := measureChurn(ctx, p, agents, &churn{w: w, rate: rate}, o.window, nil)
		sent := float64(f.received()-b0) / time.Since(t0).Seconds()
		err = errors.Join(err, f.stop())
		label := fmt.Sprintf("churn %d/s (achieved %.0f/s), %d more agents' watches of %s on %s", r.rate, r.achieved, o.watchers, o.watched(), tg.name)
		if err := reportLoad(out, label, r, err, false); err != nil {
			return fmt.Errorf("fan-out: %w", err)
		}
		row(out, label+": sent to those watches", fmt.Sprintf("%.1f MB/s, %.1f KB/s each", sent/1e6, sent/1e3/float64(o.watchers)), "", "")
		if plain.apiCPU > 0 {
			per := (r.apiCPU - plain.apiCPU) / float64(o.watchers) // % of a core per agent
			row(out, label+": kube-apiserver CPU per agent's watches", fmt.Sprintf("%.3f %% of a core: %.0f %% against %.0f %% without them just before (%.2f cores for 1,000 agents)", per, r.apiCPU, plain.apiCPU, per*10), "", "")
		}
		if tg.typha {
			per := (r.typhaCPU - plain.typhaCPU) / float64(o.watchers)
			row(out, label+": tabby-typha CPU per agent's watches", fmt.Sprintf("%.3f %% of a core: %.0f %% against %.0f %% without them just before (%.2f cores for 1,000 agents)", per, r.typhaCPU, plain.typhaCPU, per*10), "", "")
		}
	}
	return nil
}
