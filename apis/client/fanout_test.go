package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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

// After every replica failed, an informer's watch on the API server lasts until tabby-typha
// answers again, not until it times out: the agent asks tabby-typha every RetryAfter and, once it
// answers, ends its direct watches, so the informers watch through it again; a streaming list only
// after its initial events. A watch the informer ended itself is forgotten, and with none left
// the agent stops asking.
func TestWatchesReturnToTypha(t *testing.T) {
	var typhaUp atomic.Bool
	var probes atomic.Int32
	fan := &Fanout{retryAfter: 20 * time.Millisecond, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now, onTypha: map[string]bool{},
		probe: func(context.Context) error {
			probes.Add(1)
			if !typhaUp.Load() {
				return errors.New("connection refused")
			}
			return nil
		}}
	var typhaWatches, directWatches atomic.Int32
	var lastDirect atomic.Pointer[watch.FakeWatcher]
	typha := &cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
		if !typhaUp.Load() {
			return nil, errors.New("connection refused")
		}
		typhaWatches.Add(1)
		return watch.NewFake(), nil
	}}
	direct := &cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
		directWatches.Add(1)
		w := watch.NewFake()
		lastDirect.Store(w)
		return w, nil
	}}
	l := &failover{fan: fan, typha: typha, direct: direct, resource: "ipamblocks"}
	ctx := context.Background()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 5s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}

	if _, err := l.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); err != nil {
		t.Fatal(err)
	}
	held := lastDirect.Load()
	yes := true
	sw, err := l.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &yes})
	if err != nil {
		t.Fatal(err)
	}
	streaming := lastDirect.Load()
	relayed := make(chan watch.Event, 10)
	go func() {
		for ev := range sw.ResultChan() {
			relayed <- ev
		}
		close(relayed)
	}()
	if directWatches.Load() != 2 || typhaWatches.Load() != 0 {
		t.Fatalf("with tabby-typha down: %d direct and %d tabby-typha watches, want 2 and 0", directWatches.Load(), typhaWatches.Load())
	}
	waitFor("three probes", func() bool { return probes.Load() >= 3 })
	if held.IsStopped() {
		t.Fatal("the direct watch ended while tabby-typha did not answer")
	}

	typhaUp.Store(true)
	waitFor("end of the direct watch once tabby-typha answers", held.IsStopped)
	// A streaming list goes on as its informer's watch: cut after its initial events (and not
	// before, or the informer would list again), it moves to tabby-typha like any watch.
	streaming.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "12"}})
	if ev := <-relayed; ev.Type != watch.Added {
		t.Fatalf("relayed %v, want the streaming list's ADDED", ev.Type)
	}
	if streaming.IsStopped() {
		t.Fatal("a streaming list was cut before its initial events ended: its informer would list again")
	}
	streaming.Action(watch.Bookmark, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "12",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	if ev := <-relayed; ev.Type != watch.Bookmark {
		t.Fatalf("relayed %v, want the initial-events-end bookmark", ev.Type)
	}
	waitFor("end of the streaming list after its initial events", streaming.IsStopped)
	if _, open := <-relayed; open {
		t.Error("the relayed streaming list did not end with it")
	}
	if _, err := l.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "11"}); err != nil {
		t.Fatal(err)
	}
	if typhaWatches.Load() != 1 || directWatches.Load() != 2 || !fan.ViaTypha() {
		t.Errorf("the watch after: %d tabby-typha and %d direct watches, via tabby-typha %v; want 1, 2 and true", typhaWatches.Load(), directWatches.Load(), fan.ViaTypha())
	}

	// A direct watch its informer ends (a timeout) is forgotten; with none left, the prober ends.
	typhaUp.Store(false)
	w, err := l.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "12"})
	if err != nil || directWatches.Load() != 3 {
		t.Fatalf("tabby-typha down again: %v, %d direct watches; want a third", err, directWatches.Load())
	}
	w.Stop()
	waitFor("the prober to stop with no direct watch", func() bool {
		fan.mu.Lock()
		defer fan.mu.Unlock()
		return !fan.probing
	})
}
