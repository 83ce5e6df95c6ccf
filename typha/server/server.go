// Package server answers the list and watch requests of tabby-node's informers from tabby-typha's
// feeds, in the API server's own format: the agent's client-go reflectors run unchanged, and an
// agent moves between tabby-typha replicas and the API server at the same resourceVersion.
//
// It serves whole collections only (no label or field selector) of the kinds it has feeds for,
// and only to callers the API server itself would let list them (Authorizer).
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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tabbynet/tabby/typha/feed"
)

// Authorizer decides whether the bearer of token may list and watch the resource; the error is
// an API status (401, 403) the client sees.
type Authorizer interface {
	Authorize(ctx context.Context, token string, resource schema.GroupVersionResource) error
}

// Server serves feeds at their API paths.
type Server struct {
	feeds   map[string]served // by path: /api/v1/nodes, /apis/tabby.dev/v1/ipamblocks
	auth    Authorizer
	metrics *Metrics
	log     *slog.Logger
	// maxWatch bounds a watch's life when the client names none.
	maxWatch time.Duration
	// bookmarkEvery: a quiet watch that allows bookmarks gets one this often, as from the API
	// server, so its client resumes anywhere without a list.
	bookmarkEvery time.Duration
}

type served struct {
	feed     *feed.Feed
	resource schema.GroupVersionResource
}

// New serves the feeds, by resource; auth may not be nil, m and log may.
func New(feeds map[schema.GroupVersionResource]*feed.Feed, auth Authorizer, m *Metrics, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{feeds: map[string]served{}, auth: auth, metrics: m, log: log, maxWatch: 30 * time.Minute, bookmarkEvery: time.Minute}
	for gvr, f := range feeds {
		s.feeds[Path(gvr)] = served{feed: f, resource: gvr}
	}
	return s
}

// Path is where the API server serves a cluster-wide collection of the resource.
func Path(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return "/api/" + gvr.Version + "/" + gvr.Resource
	}
	return "/apis/" + gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
}

// Synced tells whether every feed has its first list (readiness).
func (s *Server) Synced() bool {
	for _, f := range s.feeds {
		if !f.feed.HasSynced() {
			return false
		}
	}
	return true
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.feeds[r.URL.Path]
	if !ok || r.Method != http.MethodGet {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		writeStatus(w, apierrors.NewUnauthorized("a bearer token is required (the agent's service account token)"))
		return
	}
	start := time.Now()
	if err := s.auth.Authorize(r.Context(), token, sv.resource); err != nil {
		s.log.Info("refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		writeStatus(w, err)
		return
	}
	s.log.Debug("request", "path", r.URL.Path, "query", r.URL.RawQuery, "remote", r.RemoteAddr, "auth", time.Since(start))
	q := r.URL.Query()
	for _, sel := range []string{"labelSelector", "fieldSelector"} {
		if q.Get(sel) != "" {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("%s=%q: tabby-typha serves whole collections; ask the API server", sel, q.Get(sel))))
			return
		}
	}
	if !sv.feed.HasSynced() {
		writeStatus(w, apierrors.NewServiceUnavailable(sv.resource.Resource+" not synced yet"))
		return
	}
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		s.watch(w, r, sv)
		return
	}
	s.metrics.list(sv.resource.Resource)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(sv.feed.EncodedList())
}

func (s *Server) watch(w http.ResponseWriter, r *http.Request, sv served) {
	q := r.URL.Query()
	ctx := r.Context()
	life := s.maxWatch
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 && time.Duration(t)*time.Second < life {
		life = time.Duration(t) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, life)
	defer cancel()

	rvs := q.Get("resourceVersion")
	bookmark := q.Get("sendInitialEvents") == "true"
	var initial [][]byte
	var cur *feed.Cursor
	var rv uint64
	if bookmark || rvs == "" || rvs == "0" {
		if bookmark && rvs != "" {
			// "Not older than rvs": the agent may come from a replica, or the API server, ahead of
			// this one.
			want, err := feed.ParseRV(rvs)
			if err != nil {
				writeStatus(w, apierrors.NewBadRequest(err.Error()))
				return
			}
			wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
			ok := sv.feed.WaitFor(wctx, want)
			wcancel()
			if !ok {
				writeStatus(w, tooLarge(rvs, sv.feed.ResourceVersion()))
				return
			}
		}
		initial, rv, cur = sv.feed.Snapshot()
	} else {
		var err error
		if rv, err = feed.ParseRV(rvs); err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if cur, err = sv.feed.Since(rv); err != nil {
			writeStatus(w, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%s)", rv, err)))
			return
		}
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	done := s.metrics.watchStarted(sv.resource.Resource)
	defer done()
	write := func(frames [][]byte) error {
		n := 0
		for _, fr := range frames {
			if _, err := w.Write(fr); err != nil {
				return err
			}
			n += len(fr)
		}
		s.metrics.sent(sv.resource.Resource, len(frames), n)
		return rc.Flush()
	}
	if bookmark {
		initial = append(initial, feed.Bookmark(sv.feed.Kind(), rv, true))
	}
	var idle <-chan time.Time
	if q.Get("allowWatchBookmarks") == "true" {
		t := time.NewTicker(s.bookmarkEvery)
		defer t.Stop()
		idle = t.C
	}
	if len(initial) > 0 {
		if err := write(initial); err != nil {
			return
		}
	} else if err := rc.Flush(); err != nil { // the client's Watch returns at the headers
		return
	}
	for {
		frames, err := cur.Next(ctx, idle)
		switch {
		case errors.Is(err, feed.ErrGone):
			// The client watches again from its resourceVersion, or lists (410).
			s.metrics.expired(sv.resource.Resource)
			st := apierrors.NewResourceExpired(fmt.Sprintf("watch of %s ended: %s", sv.resource.Resource, err)).ErrStatus
			raw, _ := json.Marshal(&st)
			_ = write([][]byte{feed.Frame("ERROR", raw)})
			return
		case err != nil:
			return // the watch's time is up, or the client went
		}
		if frames == nil { // idle: a bookmark, if nothing is left to send
			rv, ok := cur.CaughtUp()
			if !ok {
				continue
			}
			frames = [][]byte{feed.Bookmark(sv.feed.Kind(), rv, false)}
		}
		if err := write(frames); err != nil {
			return
		}
	}
}

func tooLarge(want string, have uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %s, current: %d", want, have), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// writeStatus answers with err as the API server would: a Status object and its code.
func writeStatus(w http.ResponseWriter, err error) {
	var st metav1.Status
	var api apierrors.APIStatus
	if errors.As(err, &api) {
		st = api.Status()
	} else {
		st = apierrors.NewInternalError(err).ErrStatus
	}
	st.Kind, st.APIVersion = "Status", "v1"
	raw, _ := json.Marshal(&st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(raw)
}
