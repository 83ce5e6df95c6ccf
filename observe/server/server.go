// Package server is tabby-node's observation endpoint: the node's flow log and BGP status over
// HTTPS, to callers whose bearer token the API server accepts and whose RBAC allows get on
// flows or bgpstatuses in group tabby.dev (the Reviewer of typha/auth asks it).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/observe"
)

// Authorizer decides whether the bearer of token may do verbs on resource; the error is an API
// status (401, 403, 503) the caller sees. typha/auth's Reviewer is one.
type Authorizer interface {
	AuthorizeVerbs(ctx context.Context, token string, resource schema.GroupVersionResource, verbs ...string) error
}

// Config is what the endpoint serves.
type Config struct {
	Node string
	// Flows is the node's flow log; nil when this tabby-node has none.
	Flows flow.Source
	// FlowsEnabled tells whether felix records flows now (FelixConfiguration flowLogs.enabled);
	// nil: whenever Flows is set.
	FlowsEnabled func() bool
	// BGP is the node's BGP status; nil without BGP (--bgp=none).
	BGP  status.Source
	Auth Authorizer
	// Heartbeat is how often a following stream carries at least an empty line; 15 s when zero.
	Heartbeat time.Duration
	// MaxStreams bounds the flow streams served at once; 64 when zero.
	MaxStreams int
	Log        *slog.Logger
}

// Server serves the endpoint's paths.
type Server struct {
	cfg     Config
	streams chan struct{}
	mux     *http.ServeMux
}

// writeTimeout bounds one write to a client: a reader that stopped reading is let go.
const writeTimeout = 30 * time.Second

// New serves cfg; Auth may not be nil.
func New(cfg Config) *Server {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 64
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, streams: make(chan struct{}, cfg.MaxStreams), mux: http.NewServeMux()}
	s.mux.HandleFunc(observe.FlowsPath, s.guard(observe.FlowsResource, s.flows))
	s.mux.HandleFunc(observe.BGPPath, s.guard(observe.BGPResource, s.bgp))
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// guard lets through GET requests whose token may get resource.
func (s *Server) guard(resource schema.GroupVersionResource, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, fmt.Sprintf("method %s not allowed: GET %s", r.Method, r.URL.Path), http.StatusMethodNotAllowed)
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, fmt.Sprintf("Unauthorized: a bearer token is required (one the API server accepts, allowed to %s %s.%s)",
				observe.Verb, resource.Resource, resource.Group), http.StatusUnauthorized)
			return
		}
		if err := s.cfg.Auth.AuthorizeVerbs(r.Context(), token, resource, observe.Verb); err != nil {
			s.cfg.Log.Info("observation request refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			code := http.StatusServiceUnavailable
			var st apierrors.APIStatus
			if errors.As(err, &st) && st.Status().Code != 0 {
				code = int(st.Status().Code)
			}
			http.Error(w, fmt.Sprintf("%s: %v", http.StatusText(code), err), code)
			return
		}
		next(w, r)
	}
}

// flowQuery reads the query of FlowsPath.
func flowQuery(r *http.Request) (f flow.Filter, follow bool, since time.Time, err error) {
	q := r.URL.Query()
	f = flow.Filter{From: q.Get("from"), To: q.Get("to"), Verdict: flow.Verdict(q.Get("verdict"))}
	if err := f.Check(); err != nil {
		return f, false, since, err
	}
	if v := q.Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			return f, false, since, fmt.Errorf("follow: Invalid value: %q: want 1 or 0", v)
		}
	}
	if v := q.Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return f, false, since, fmt.Errorf("since: Invalid value: %q: want an RFC 3339 time", v)
		}
	}
	return f, follow, since, nil
}

func (s *Server) flows(w http.ResponseWriter, r *http.Request) {
	f, follow, since, err := flowQuery(r)
	if err != nil {
		http.Error(w, "Bad Request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if s.cfg.Flows == nil || s.cfg.FlowsEnabled != nil && !s.cfg.FlowsEnabled() {
		http.Error(w, fmt.Sprintf("Service Unavailable: flow logs are off on node %s: turn them on with FelixConfiguration flowLogs.enabled: true", s.cfg.Node),
			http.StatusServiceUnavailable)
		return
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		http.Error(w, fmt.Sprintf("Too Many Requests: node %s serves %d flow streams at once already", s.cfg.Node, s.cfg.MaxStreams), http.StatusTooManyRequests)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := &stream{w: w, rc: http.NewResponseController(w), follow: follow}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if follow {
		w.Header().Set(observe.HeartbeatHeader, s.cfg.Heartbeat.String())
	}
	w.WriteHeader(http.StatusOK)
	if err := out.flush(); err != nil {
		return
	}
	var beats sync.WaitGroup
	if follow {
		beats.Add(1)
		go func() {
			defer beats.Done()
			out.heartbeat(ctx, s.cfg.Heartbeat, cancel)
		}()
	}
	err = s.cfg.Flows.Flows(ctx, f, follow, func(rec flow.Record) error {
		if !since.IsZero() && !rec.End.After(since) {
			return nil
		}
		return out.record(rec)
	})
	cancel()
	beats.Wait()
	if err != nil && ctx.Err() == nil {
		// The status line is gone: the client sees the stream end early, the log says why.
		s.cfg.Log.Warn("flow stream ended", "remote", r.RemoteAddr, "err", err)
	}
}

// stream writes records and heartbeats to one client, one at a time.
type stream struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	follow bool
	buf    []byte
}

func (s *stream) record(r flow.Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode flow record: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(append(s.buf[:0], b...), '\n')
	if err := s.write(s.buf); err != nil {
		return err
	}
	if s.follow {
		return s.flushLocked()
	}
	return nil
}

func (s *stream) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := s.w.Write(b)
	return err
}

func (s *stream) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

func (s *stream) flushLocked() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return s.rc.Flush()
}

// heartbeat writes an empty line every interval until ctx ends; a failed write ends the stream.
func (s *stream) heartbeat(ctx context.Context, every time.Duration, stop context.CancelFunc) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		err := s.write([]byte("\n"))
		if err == nil {
			err = s.flushLocked()
		}
		s.mu.Unlock()
		if err != nil {
			stop()
			return
		}
	}
}

// bgpTimeout bounds one status read: the speaker answers from memory.
const bgpTimeout = 10 * time.Second

func (s *Server) bgp(w http.ResponseWriter, r *http.Request) {
	if s.cfg.BGP == nil {
		http.Error(w, fmt.Sprintf("Service Unavailable: node %s runs without BGP (--bgp=none): no BGP status", s.cfg.Node), http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), bgpTimeout)
	defer cancel()
	reply, err := s.cfg.BGP.Status(ctx)
	if err != nil {
		http.Error(w, fmt.Sprintf("Service Unavailable: BGP status of node %s: %v", s.cfg.Node, err), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(reply); err != nil {
		s.cfg.Log.Debug("BGP status not written", "remote", r.RemoteAddr, "err", err)
	}
}
