package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/typha/feed"
)

func serve(t *testing.T, s *Server) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL + Path(blocks)
}

func newServer(t *testing.T) (*Server, *feed.Feed) {
	t.Helper()
	f := feed.New(feed.Config{Kind: v1.SchemeGroupVersion.WithKind("IPAMBlock"), MaxEvents: 2})
	if err := f.Replace(nil, "10"); err != nil {
		t.Fatal(err)
	}
	return New(map[schema.GroupVersionResource]*feed.Feed{blocks: f}, allowAll{}, nil, nil), f
}

type frame struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// watch opens a watch and returns its frames as they come.
func watch(t *testing.T, url string) (*http.Response, <-chan frame) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan frame, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var f frame
			if json.Unmarshal(sc.Bytes(), &f) == nil {
				out <- f
			}
		}
	}()
	return resp, out
}

func next(t *testing.T, frames <-chan frame) (string, metav1.ObjectMeta) {
	t.Helper()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatal("the watch ended")
		}
		var m struct{ Metadata metav1.ObjectMeta }
		_ = json.Unmarshal(f.Object, &m)
		return f.Type, m.Metadata
	case <-time.After(5 * time.Second):
		t.Fatal("no frame")
	}
	return "", metav1.ObjectMeta{}
}

// A watch from a resourceVersion the log no longer reaches is the API server's 410 Expired, which
// makes a reflector list again.
func TestWatchTooOldIsExpired(t *testing.T) {
	s, f := newServer(t)
	url := serve(t, s)
	for rv := 11; rv <= 13; rv++ {
		if err := f.Add(block(rv)); err != nil {
			t.Fatal(err)
		}
	}
	resp, _ := watch(t, url+"?watch=1&resourceVersion=10")
	var st metav1.Status
	_ = json.NewDecoder(resp.Body).Decode(&st)
	if err := (&apierrors.StatusError{ErrStatus: st}); resp.StatusCode != http.StatusGone || !apierrors.IsResourceExpired(err) {
		t.Errorf("watch from 10 with the log at 12-13: %d %+v, want 410 Expired", resp.StatusCode, st)
	}
}

// A quiet watch that allows bookmarks gets one at the feed's resourceVersion, so its client can
// resume there on any replica; one that does not allow them gets none.
func TestQuietWatchGetsBookmarks(t *testing.T) {
	s, f := newServer(t)
	s.bookmarkEvery = 50 * time.Millisecond
	url := serve(t, s)
	f.UpdateResourceVersion("42") // the API server's bookmark: nothing of this kind changed
	_, frames := watch(t, url+"?watch=1&resourceVersion=10&allowWatchBookmarks=true")
	if typ, m := next(t, frames); typ != "BOOKMARK" || m.ResourceVersion != "42" {
		t.Errorf("quiet watch: %s at %s, want a BOOKMARK at 42", typ, m.ResourceVersion)
	}
	_, plain := watch(t, url+"?watch=1&resourceVersion=10")
	if err := f.Add(block(43)); err != nil {
		t.Fatal(err)
	}
	if typ, m := next(t, plain); typ != "ADDED" || m.ResourceVersion != "43" {
		t.Errorf("watch without bookmarks: %s at %s first, want the ADDED at 43", typ, m.ResourceVersion)
	}
}

// A watch-list ("initial events, not older than R") from a client that was on a replica ahead of
// this one waits until this one has caught up to R, then sends the state and the bookmark that
// ends it; if it does not catch up in time, it is the API server's "too large resource version".
func TestInitialEventsNotOlderThan(t *testing.T) {
	s, f := newServer(t)
	url := serve(t, s)
	go func() {
		time.Sleep(200 * time.Millisecond) // the replica's own watch delivers R a little later
		_ = f.Add(block(20))
	}()
	_, frames := watch(t, url+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=20")
	if typ, m := next(t, frames); typ != "ADDED" || m.ResourceVersion != "20" {
		t.Errorf("first initial event: %s at %s, want the block at 20", typ, m.ResourceVersion)
	}
	if typ, m := next(t, frames); typ != "BOOKMARK" || m.ResourceVersion != "20" || m.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("then %s at %s %v, want the initial-events-end BOOKMARK at 20", typ, m.ResourceVersion, m.Annotations)
	}

	resp, _ := watch(t, url+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=99")
	var st metav1.Status
	_ = json.NewDecoder(resp.Body).Decode(&st)
	if !apierrors.HasStatusCause(&apierrors.StatusError{ErrStatus: st}, metav1.CauseTypeResourceVersionTooLarge) {
		t.Errorf("not older than 99, the feed at 20: %d %+v, want too large", resp.StatusCode, st)
	}
}
