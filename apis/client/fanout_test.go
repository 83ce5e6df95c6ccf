package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// fakeSource counts its lists and answers with err.
type fakeSource struct {
	lists int
	err   error
}

func (s *fakeSource) listWatch() *cache.ListWatch {
	return &cache.ListWatch{ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
		s.lists++
		if s.err != nil {
			return nil, s.err
		}
		return &metav1.List{}, nil
	}}
}

// Where an informer lists: tabby-typha while it answers; after a connection failure, tabby-typha
// once more (a fresh connection), then the API server, without asking tabby-typha, for
// RetryAfter; tabby-typha again after that. An API status is tabby-typha's answer: a 410 is the
// watch protocol, passed on (the informer lists again through tabby-typha), any other goes to
// the API server at once; the caller's own cancellation is passed on.
func TestFailover(t *testing.T) {
	now := time.Unix(1e9, 0)
	fan := &Fanout{retryAfter: 30 * time.Second, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: func() time.Time { return now }, onTypha: map[string]bool{}}
	typha, direct := &fakeSource{}, &fakeSource{}
	l := &failover{fan: fan, typha: typha.listWatch(), direct: direct.listWatch(), resource: "ipamblocks"}
	ctx := context.Background()
	list := func(wantTypha, wantDirect int, wantErr bool) {
		t.Helper()
		_, err := l.ListWithContext(ctx, metav1.ListOptions{})
		if (err != nil) != wantErr || typha.lists != wantTypha || direct.lists != wantDirect {
			t.Fatalf("err %v, lists typha %d direct %d; want error %v, %d and %d", err, typha.lists, direct.lists, wantErr, wantTypha, wantDirect)
		}
	}
	list(1, 0, false)
	if !fan.ViaTypha() {
		t.Error("after a list through tabby-typha: not on it")
	}
	typha.err = errors.New("connection refused")
	list(3, 1, false)
	if fan.ViaTypha() {
		t.Error("after a fallback: still on tabby-typha")
	}
	now = now.Add(29 * time.Second)
	list(3, 2, false) // within RetryAfter: tabby-typha not asked
	now = now.Add(2 * time.Second)
	typha.err = nil
	list(4, 2, false)
	if !fan.ViaTypha() {
		t.Error("back on tabby-typha: not counted")
	}
	typha.err = apierrors.NewResourceExpired("too old")
	list(5, 2, true)
	typha.err = apierrors.NewTooManyRequests("busy", 1)
	list(6, 3, false)
	now = now.Add(time.Minute)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	typha.err = context.Canceled
	if _, err := l.ListWithContext(cctx, metav1.ListOptions{}); err == nil || direct.lists != 3 {
		t.Errorf("a cancelled list: %v, %d direct lists; want the error, no fallback", err, direct.lists)
	}
}
