// Package ui is tabby's web view: a page that shows, live, the cluster's flow log (denied flows
// highlighted with the rule that denied them) and the BGP mesh drawn as a graph, and the two
// endpoints it reads: GET /api/flows (Server-Sent Events of flow records) and GET /api/topology
// (the mesh as JSON, derived by BuildTopology). The page is built from web/ by `make ui` and
// embedded; it fetches nothing from outside the server. `tabbyctl ui` serves it with the
// operator's credentials, reading the same cluster-wide API as `tabbyctl flows`.
package ui

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/bird/status"
)

// Backend is what the view reads: the cluster's flow log and every node's BGP status.
type Backend interface {
	// Flows sends the records that match f, oldest first, then with follow each new one until
	// ctx is done.
	Flows(ctx context.Context, f flow.Filter, follow bool, send func(flow.Record) error) error
	// BGP returns every node's BGP status, or why a node did not answer.
	BGP(ctx context.Context) ([]status.NodeReply, error)
}

//go:embed all:web/dist
var dist embed.FS

// Options tune the handler; zero values are the defaults.
type Options struct {
	Logger *slog.Logger
	// Heartbeat is how often an idle flow stream sends a comment, so that a proxy keeps it open
	// and a closed page is noticed (default 15 s).
	Heartbeat time.Duration
	// BGPTimeout bounds one topology read (default 30 s: longer than the backend's own wait
	// for a node, so one node that does not answer is reported as such, not as a failed read).
	BGPTimeout time.Duration
}

type handler struct {
	b    Backend
	o    Options
	mux  *http.ServeMux
	page http.Handler
}

// NewHandler serves the page and its API from b.
func NewHandler(b Backend, o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.BGPTimeout <= 0 {
		o.BGPTimeout = 30 * time.Second
	}
	site, err := fs.Sub(dist, "web/dist")
	if err != nil {
		panic(err) // the embed pattern names web/dist: a build without it does not compile
	}
	h := &handler{b: b, o: o, mux: http.NewServeMux(), page: http.FileServerFS(site)}
	h.mux.HandleFunc("GET /api/flows", h.flows)
	h.mux.HandleFunc("GET /api/topology", h.topology)
	h.mux.HandleFunc("GET /", h.static)
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Everything is served from here: the page needs nothing from elsewhere.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.mux.ServeHTTP(w, r)
}

func (h *handler) static(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	h.page.ServeHTTP(w, r)
}

// ParseFilter reads a flow filter from the query: from, to (NS/POD, NS/ or an address),
// verdict (allow or deny) and node; a value that can match nothing is refused by name.
func ParseFilter(q url.Values) (flow.Filter, error) {
	f := flow.Filter{From: q.Get("from"), To: q.Get("to"), Verdict: flow.Verdict(q.Get("verdict")), Node: q.Get("node")}
	return f, f.Check()
}

// flows streams records as Server-Sent Events: an event "flow" per record, its data the
// record's JSON. A page that reconnects gets the kept records again, so it starts afresh on
// each "open".
func (h *handler) flows(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		h.o.Logger.Debug("flow stream: flush", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// One writer at a time: the heartbeat and the records share the connection.
	out := make(chan []byte)
	errc := make(chan error, 1)
	go func() {
		errc <- h.b.Flows(ctx, f, true, func(rec flow.Record) error {
			data, err := json.Marshal(rec)
			if err != nil {
				return fmt.Errorf("flow record: %w", err)
			}
			select {
			case out <- fmt.Appendf(nil, "event: flow\ndata: %s\n\n", data):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	tick := time.NewTicker(h.o.Heartbeat)
	defer tick.Stop()
	for {
		var msg []byte
		select {
		case msg = <-out:
		case <-tick.C:
			msg = []byte(": keep-alive\n\n")
		case err := <-errc:
			if ctx.Err() == nil && err != nil {
				// The page shows the error and EventSource tries again.
				h.o.Logger.Warn("flow stream", "filter", f, "err", err)
				data, _ := json.Marshal(err.Error())
				_, _ = fmt.Fprintf(w, "event: failure\ndata: %s\n\n", data)
				_ = rc.Flush()
			}
			return
		case <-ctx.Done():
			return
		}
		if _, err := w.Write(msg); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func (h *handler) topology(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.BGPTimeout)
	defer cancel()
	replies, err := h.b.BGP(ctx)
	if err != nil {
		h.o.Logger.Warn("topology", "err", err)
		http.Error(w, fmt.Sprintf("BGP status: %v", err), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(BuildTopology(replies)); err != nil {
		h.o.Logger.Debug("topology: write", "err", err)
	}
}
