// Package typha is tabby-typha, the fan-out tier between the API server and the agents: one
// watch of each cluster-wide kind tabby-node reads (client.FannedOut), served to every agent as
// the API server would serve it, each event encoded once (feed) and sent to many (server).
//
// Without it every agent holds its own watches on the API server, which writes each event to
// each agent, so the API server's CPU grows with the nodes times the churn. With it, the API
// server serves one watch per replica, and the writes to the agents are the replicas', which
// scale out.
package typha

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/trim"
	"github.com/tabbynet/tabby/typha/auth"
	"github.com/tabbynet/tabby/typha/feed"
	"github.com/tabbynet/tabby/typha/server"
)

// Config is tabby-typha's configuration; every field is a flag of cmd/tabby-typha.
type Config struct {
	Kubeconfig string
	// Listen serves the agents (TLS, HTTP/1.1) with CertFile and KeyFile (port 0: any).
	Listen            string
	CertFile, KeyFile string
	// HealthAddr serves /livez and /readyz (ready: every feed has its first list); MetricsAddr
	// /metrics. Empty disables either.
	HealthAddr, MetricsAddr string
	// MaxConnAge closes an agent's connection at a random age between it and twice it, so that
	// agents spread over the replicas again after one restarted (0: never).
	MaxConnAge time.Duration
}

// Validate checks the configuration before anything starts.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return errors.New("--listen is required")
	}
	if c.CertFile == "" || c.KeyFile == "" {
		return fmt.Errorf("--tls-cert-file and --tls-key-file are required: agents verify tabby-typha's certificate (got %q, %q)", c.CertFile, c.KeyFile)
	}
	return nil
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	restCfg, err := client.LoadConfig(cfg.Kubeconfig, "")
	if err != nil {
		return err
	}
	t, err := New(restCfg, cfg, log)
	if err != nil {
		return err
	}
	return t.Run(ctx)
}

// Typha is one replica: its feeds, and its listeners, open from New on.
type Typha struct {
	log       *slog.Logger
	reflect   []*cache.Reflector
	servers   []*http.Server
	listeners []net.Listener
}

// New loads the certificate, makes the feeds and opens the listeners; Run serves.
func New(restCfg *rest.Config, cfg Config, log *slog.Logger) (_ *Typha, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load the serving certificate: %w", err)
	}
	c, err := client.New(restCfg)
	if err != nil {
		return nil, err
	}
	reviewer, err := auth.New(restCfg)
	if err != nil {
		return nil, err
	}
	srcs, err := sources(c)
	if err != nil {
		return nil, err
	}
	t := &Typha{log: log}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	relists := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_typha_relists_total",
		Help: "Lists of a kind from the API server after the first (its watch's resourceVersion was gone); the agents got the difference as events."}, []string{"resource"})
	reg.MustRegister(relists)
	feeds := map[schema.GroupVersionResource]*feed.Feed{}
	for _, s := range srcs {
		onRelist := func(events int) {
			relists.WithLabelValues(s.resource.Resource).Inc()
			log.Info("listed again from the API server; the agents' watches get the difference", "resource", s.resource.Resource, "events", events)
		}
		f := feed.New(feed.Config{Kind: s.kind, Trim: trim.Object, OnRelist: onRelist})
		feeds[s.resource] = f
		t.reflect = append(t.reflect, cache.NewReflectorWithOptions(s.lw, s.obj, f, cache.ReflectorOptions{Name: "typha/" + s.resource.Resource}))
	}
	srv := server.New(feeds, reviewer, server.NewMetrics(reg), log)
	defer func() {
		if err != nil {
			for _, l := range t.listeners {
				_ = l.Close()
			}
		}
	}()
	for _, h := range []struct {
		addr string
		mux  http.Handler
	}{{cfg.Listen, srv}, {cfg.HealthAddr, healthMux(srv)}, {cfg.MetricsAddr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}} {
		if h.addr == "" {
			t.listeners, t.servers = append(t.listeners, nil), append(t.servers, nil)
			continue
		}
		l, err := net.Listen("tcp", h.addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", h.addr, err)
		}
		t.listeners = append(t.listeners, l)
		t.servers = append(t.servers, &http.Server{Handler: h.mux, ReadHeaderTimeout: 5 * time.Second})
	}
	// HTTP/1.1, though the agents offer HTTP/2: a watch is then a connection of its own, and an
	// event one TLS record written to it. Over HTTP/2 the agent also answered each event with a
	// WINDOW_UPDATE, which tabby-typha read and passed to the connection's goroutine: four system
	// calls and two goroutine hand-offs per event and agent instead of two.
	t.servers[0].TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	t.servers[0].ConnState = newConnAges(cfg.MaxConnAge, reg).state
	return t, nil
}

// Addrs are where it listens: the agents' address, health and metrics ("" when off).
func (t *Typha) Addrs() (api, health, metrics string) {
	var out [3]string
	for i, l := range t.listeners {
		if l != nil {
			out[i] = l.Addr().String()
		}
	}
	return out[0], out[1], out[2]
}

// Run watches the API server and serves until ctx ends.
func (t *Typha) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range t.reflect {
		g.Go(func() error { r.RunWithContext(gctx); return nil })
	}
	for i, hs := range t.servers {
		if hs == nil {
			continue
		}
		l := t.listeners[i]
		g.Go(func() error {
			var err error
			if i == 0 {
				err = hs.ServeTLS(l, "", "")
			} else {
				err = hs.Serve(l)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve on %s: %w", l.Addr(), err)
			}
			return nil
		})
	}
	api, _, _ := t.Addrs()
	t.log.Info("tabby-typha serving", "listen", api, "resources", len(t.reflect))
	<-gctx.Done()
	// Agents move to another replica (or the API server) at their resourceVersion.
	for _, hs := range t.servers {
		if hs != nil {
			_ = hs.Close()
		}
	}
	return g.Wait()
}

func healthMux(srv *server.Server) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !srv.Synced() {
			http.Error(w, "not every resource is synced from the API server yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
