package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// fakeAPI answers token and access reviews: tokens "agent-N" are the tabby-node service account,
// which may list and watch pods; "down" makes every review fail.
type fakeAPI struct {
	tokenReviews, accessReviews atomic.Int64
	down                        atomic.Bool
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, "/tokenreviews"):
		f.tokenReviews.Add(1)
		var tr authnv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		if strings.HasPrefix(tr.Spec.Token, "agent-") {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "system:serviceaccount:kube-system:tabby-node",
				Groups: []string{"system:serviceaccounts"}, Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {tr.Spec.Token}}}}
		}
		_ = json.NewEncoder(w).Encode(&tr)
	case strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
		f.accessReviews.Add(1)
		var sar authzv1.SubjectAccessReview
		_ = json.NewDecoder(r.Body).Decode(&sar)
		sar.Status.Allowed = sar.Spec.ResourceAttributes.Resource == "pods"
		_ = json.NewEncoder(w).Encode(&sar)
	default:
		http.NotFound(w, r)
	}
}

var (
	pods  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodes = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

func newReviewer(t *testing.T) (*Reviewer, *fakeAPI, *time.Time) {
	t.Helper()
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	r, err := New(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	r.now = func() time.Time { return now }
	return r, api, &now
}

// A thousand agents of one service account, each asking for a resource eight times at once,
// cost a token review each and one access review per verb; a second round, within the minute,
// costs nothing.
func TestReviewsAreSharedByIdentity(t *testing.T) {
	r, api, _ := newReviewer(t)
	ctx := context.Background()
	for round := range 2 {
		for i := range 1000 {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if err := r.Authorize(ctx, fmt.Sprintf("agent-%d", i), pods); err != nil {
						t.Errorf("round %d agent %d: %v", round, i, err)
					}
				})
			}
			wg.Wait()
		}
	}
	if n := api.tokenReviews.Load(); n != 1000 {
		t.Errorf("%d token reviews, want 1000 (one per agent)", n)
	}
	if n := api.accessReviews.Load(); n != 2 {
		t.Errorf("%d access reviews, want 2 (list and watch, once for the service account)", n)
	}
}

// A refusal is the API server's status and is kept ten seconds; an unknown token is 401; a
// review that could not be made is 503 and not kept; a yes expires after a minute.
func TestAnswers(t *testing.T) {
	r, api, now := newReviewer(t)
	ctx := context.Background()
	if err := r.Authorize(ctx, "agent-1", nodes); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "tabby-node") {
		t.Errorf("nodes: %v, want 403 naming the user", err)
	}
	if err := r.Authorize(ctx, "stolen", pods); !apierrors.IsUnauthorized(err) {
		t.Errorf("unknown token: %v, want 401", err)
	}
	before := api.accessReviews.Load()
	*now = now.Add(5 * time.Second)
	_ = r.Authorize(ctx, "agent-1", nodes)
	if api.accessReviews.Load() != before {
		t.Error("a refusal was asked again within ten seconds")
	}
	*now = now.Add(6 * time.Second)
	_ = r.Authorize(ctx, "agent-1", nodes)
	if api.accessReviews.Load() == before {
		t.Error("a refusal was kept past ten seconds")
	}

	api.down.Store(true)
	if err := r.Authorize(ctx, "agent-2", pods); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("API server down: %v, want 503", err)
	}
	api.down.Store(false)
	if err := r.Authorize(ctx, "agent-2", pods); err != nil {
		t.Errorf("after the API server came back: %v (a failure to ask was kept)", err)
	}
	*now = now.Add(61 * time.Second)
	tr := api.tokenReviews.Load()
	if err := r.Authorize(ctx, "agent-2", pods); err != nil || api.tokenReviews.Load() != tr+1 {
		t.Errorf("after a minute: %v, %d token reviews (want one more)", err, api.tokenReviews.Load()-tr)
	}
}

// Other verbs (tabby-node's observation endpoint asks get) are reviewed and kept apart from
// list and watch.
func TestOtherVerbs(t *testing.T) {
	r, api, _ := newReviewer(t)
	ctx := context.Background()
	if err := r.Authorize(ctx, "agent-1", pods); err != nil {
		t.Fatal(err)
	}
	before := api.accessReviews.Load()
	if err := r.AuthorizeVerbs(ctx, "agent-1", pods, "get"); err != nil {
		t.Fatal(err)
	}
	if got := api.accessReviews.Load() - before; got != 1 {
		t.Errorf("get after list and watch: %d access reviews, want 1 (the answers are kept by verb)", got)
	}
	if err := r.AuthorizeVerbs(ctx, "agent-1", nodes, "get"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot get nodes") {
		t.Errorf("get nodes: %v", err)
	}
}
