package feed

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

func block(name string, rv int) *v1.IPAMBlock {
	return &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: strconv.Itoa(rv)}, Spec: v1.IPAMBlockSpec{CIDR: "10.244.0.0/26"}}
}

func newFeed(t *testing.T, max int) *Feed {
	t.Helper()
	f := New(Config{Kind: v1.SchemeGroupVersion.WithKind("IPAMBlock"), MaxEvents: max})
	if err := f.Replace([]any{block("a", 5)}, "10"); err != nil {
		t.Fatal(err)
	}
	return f
}

// names reads the frames back as client-go's watch decoder does, and returns "TYPE name@rv".
func names(t *testing.T, frames [][]byte) []string {
	t.Helper()
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, client.Scheme, client.Scheme, json.SerializerOptions{})
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(json.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(bytes.Join(frames, nil)))), ser), ser)
	var out []string
	for range frames {
		typ, obj, err := dec.Decode()
		if err != nil {
			t.Fatalf("decode %s: %v", frames, err)
		}
		m := obj.(metav1.Object)
		out = append(out, string(typ)+" "+m.GetName()+"@"+m.GetResourceVersion())
	}
	return out
}

func next(t *testing.T, c *Cursor) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fr, err := c.Next(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

// A watch from a resourceVersion gets exactly the events after it, in order, decodable by
// client-go; one from before the log's first event is Gone.
func TestSinceServesTheEventsAfter(t *testing.T) {
	f := newFeed(t, 3)
	for i, op := range []func(any) error{f.Add, f.Update, f.Update, f.Delete} {
		if err := op(block("b", 11+i)); err != nil {
			t.Fatal(err)
		}
	}
	// The log holds 12, 13, 14 (3 events): a watch from 11 or later is served.
	c, err := f.Since(12)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(names(t, next(t, c)), ","), "MODIFIED b@13,DELETED b@14"; got != want {
		t.Errorf("since 12: %s, want %s", got, want)
	}
	if _, err := f.Since(11); err != nil {
		t.Errorf("since 11 (the floor): %v", err)
	}
	if _, err := f.Since(10); !errors.Is(err, ErrGone) {
		t.Errorf("since 10, evicted: %v, want ErrGone", err)
	}
	// A client ahead of this feed (it came from another replica) gets only newer events.
	c, err = f.Since(20)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Add(block("c", 21)); err != nil {
		t.Fatal(err)
	}
	if got := names(t, next(t, c)); len(got) != 1 || got[0] != "ADDED c@21" {
		t.Errorf("since 20: %v", got)
	}
}

// A reader that falls behind the log ends its watch (Gone: the client lists again).
func TestCursorEnds(t *testing.T) {
	f := newFeed(t, 2)
	slow, err := f.Since(10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := f.Add(block("b"+strconv.Itoa(i), 11+i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := slow.Next(context.Background(), nil); !errors.Is(err, ErrGone) {
		t.Errorf("a reader behind the log: %v, want ErrGone", err)
	}
}

// A relist of the feed's own watch goes to open watches as the difference: what was added or
// changed, in resourceVersion order, then what went, at the list's resourceVersion (a client
// resumes from its last event's). The watches go on, the log keeps what it had, and a list that
// changes nothing sends nothing.
func TestRelistSendsTheDifference(t *testing.T) {
	f := newFeed(t, 100) // a@5, at 10
	for i, name := range []string{"b", "c", "d"} {
		if err := f.Add(block(name, 11+i)); err != nil {
			t.Fatal(err)
		}
	}
	waiting, err := f.Since(13)
	if err != nil {
		t.Fatal(err)
	}
	behind, err := f.Since(11)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan [][]byte, 1)
	go func() { fr, _ := waiting.Next(context.Background(), nil); done <- fr }()
	if err := f.Replace([]any{block("a", 5), block("b", 20), block("e", 18)}, "25"); err != nil {
		t.Fatal(err)
	}
	diff := "ADDED e@18,MODIFIED b@20,DELETED c@25,DELETED d@25"
	select {
	case fr := <-done:
		if got := strings.Join(names(t, fr), ","); got != diff {
			t.Errorf("a waiting watch after the relist: %s, want %s", got, diff)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting watch got nothing from the relist")
	}
	if got, want := strings.Join(names(t, next(t, behind)), ","), "ADDED c@12,ADDED d@13,"+diff; got != want {
		t.Errorf("a watch from 11: %s, want %s", got, want)
	}
	if rv, ok := waiting.CaughtUp(); !ok || rv != 25 {
		t.Errorf("caught up: %d %v, want 25", rv, ok)
	}
	if err := f.Replace([]any{block("a", 5), block("b", 20), block("e", 18)}, "25"); err != nil {
		t.Fatal(err)
	}
	if rv, ok := waiting.CaughtUp(); !ok || rv != 25 {
		t.Errorf("a relist that changes nothing: caught up %d %v, want 25, nothing to send", rv, ok)
	}
	if _, err := f.Since(11); err != nil {
		t.Errorf("since 11 after the relists: %v", err)
	}
}

// The list and the snapshot hold the current state at the feed's resourceVersion, and the list is
// encoded once per state.
func TestListAndSnapshot(t *testing.T) {
	f := newFeed(t, 10)
	if err := f.Add(block("b", 11)); err != nil {
		t.Fatal(err)
	}
	l1 := f.EncodedList()
	list := &v1.IPAMBlockList{}
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, client.Scheme, client.Scheme, json.SerializerOptions{})
	if _, _, err := ser.Decode(l1, nil, list); err != nil {
		t.Fatal(err)
	}
	if list.ResourceVersion != "11" || len(list.Items) != 2 {
		t.Errorf("list at %s with %d items, want 11 and 2", list.ResourceVersion, len(list.Items))
	}
	if l2 := f.EncodedList(); &l1[0] != &l2[0] {
		t.Error("the list was encoded again for an unchanged state")
	}
	frames, rv, c := f.Snapshot()
	if rv != 11 || len(frames) != 2 {
		t.Errorf("snapshot at %d with %d objects", rv, len(frames))
	}
	if err := f.Delete(block("a", 12)); err != nil {
		t.Fatal(err)
	}
	if got := names(t, next(t, c)); len(got) != 1 || got[0] != "DELETED a@12" {
		t.Errorf("after the snapshot: %v", got)
	}
	if got := names(t, [][]byte{Bookmark(f.Kind(), 12, true)}); got[0] != "BOOKMARK @12" {
		t.Errorf("bookmark: %v", got)
	}
}
