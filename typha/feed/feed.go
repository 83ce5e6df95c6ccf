// Package feed is one resource as tabby-typha serves it: the current objects and a log of the
// latest events, each encoded once, whatever the number of agents reading them. It is the store of
// a client-go Reflector that watches the API server (Add, Update, Delete, Replace), and what the
// server's list and watch handlers read (List, Since).
//
// Resource versions are the API server's own: an agent that watched at resourceVersion R
// through one tabby-typha resumes at R on another, or on the API server itself, with no list in
// between.
package feed

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// ErrGone is a watch from a resourceVersion the log no longer holds (or a reader too slow for
// the log): the client lists again, as from the API server's 410.
var ErrGone = errors.New("resourceVersion too old")

// Config describes a feed.
type Config struct {
	// Kind is the objects' kind, written into each encoded object (a watch decoder needs it).
	Kind schema.GroupVersionKind
	// Trim, when set, cuts an object to what the agents read before it is encoded.
	Trim func(obj any) (any, error)
	// MaxEvents and MaxBytes bound the log (0: 10,000 events, 32 MiB). A watch from older than
	// the log's first event is ErrGone.
	MaxEvents, MaxBytes int
	// OnRelist, when set, hears of each relist after the first list: how many events it made.
	OnRelist func(events int)
}

// Feed is one resource: the objects and the log of events after its floor.
type Feed struct {
	cfg Config

	mu      sync.Mutex
	objects map[string][]byte // by namespace/name key: the encoded object
	rv      uint64            // the state's resourceVersion
	synced  bool
	// The log: events[i] has sequence number base+i. A watch from resourceVersion R is served
	// while R >= floor: the events after R are all in the log.
	events   []event
	base     uint64
	floor    uint64
	logBytes int
	notify   chan struct{} // closed at every change, then replaced
	list     []byte        // the encoded list of the current state; nil when stale
}

type event struct {
	rv    uint64
	frame []byte // {"type":...,"object":...}\n, as a watch stream carries it
}

// New makes an empty feed; it is synced at its first Replace.
func New(cfg Config) *Feed {
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = 10000
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 32 << 20
	}
	return &Feed{cfg: cfg, objects: map[string][]byte{}, notify: make(chan struct{})}
}

// Kind is the feed's kind.
func (f *Feed) Kind() schema.GroupVersionKind { return f.cfg.Kind }

// HasSynced tells whether the first list is in.
func (f *Feed) HasSynced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced
}

// ResourceVersion is the state's resourceVersion.
func (f *Feed) ResourceVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rv
}

// encode trims obj, stamps its kind and encodes it; it returns the key and resourceVersion too.
func (f *Feed) encode(obj any) (key string, rv uint64, raw []byte, err error) {
	if f.cfg.Trim != nil {
		if obj, err = f.cfg.Trim(obj); err != nil {
			return "", 0, nil, err
		}
	}
	ro, ok := obj.(runtime.Object)
	if !ok {
		return "", 0, nil, fmt.Errorf("%T is not an API object", obj)
	}
	m, err := meta.Accessor(ro)
	if err != nil {
		return "", 0, nil, err
	}
	if rv, err = ParseRV(m.GetResourceVersion()); err != nil {
		return "", 0, nil, fmt.Errorf("%s %s/%s: %w", f.cfg.Kind.Kind, m.GetNamespace(), m.GetName(), err)
	}
	key, err = cache.MetaNamespaceKeyFunc(ro)
	if err != nil {
		return "", 0, nil, err
	}
	ro.GetObjectKind().SetGroupVersionKind(f.cfg.Kind)
	raw, err = json.Marshal(ro)
	if err != nil {
		return "", 0, nil, fmt.Errorf("encode %s %s: %w", f.cfg.Kind.Kind, key, err)
	}
	return key, rv, raw, nil
}

// ParseRV reads a resourceVersion: the API server's are etcd revisions, and tabby-typha orders
// events by them.
func ParseRV(s string) (uint64, error) {
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q is not a revision", s)
	}
	return rv, nil
}

// Frame is a watch event as a watch stream carries it.
func Frame(typ string, raw []byte) []byte {
	b := make([]byte, 0, len(raw)+32)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","object":`...)
	b = append(b, raw...)
	return append(b, "}\n"...)
}

func (f *Feed) apply(typ string, obj any) error {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	key, rv, raw, err := f.encode(obj)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if typ == "DELETED" {
		delete(f.objects, key)
	} else {
		f.objects[key] = raw
	}
	f.append(event{rv: rv, frame: Frame(typ, raw)})
	return nil
}

// append adds evs to the log, drops the oldest events past the bounds and wakes the watches
// once; f.mu must be held.
func (f *Feed) append(evs ...event) {
	for _, ev := range evs {
		f.rv = max(f.rv, ev.rv)
		f.logBytes += len(ev.frame)
	}
	f.events = append(f.events, evs...)
	drop := 0
	for len(f.events)-drop > f.cfg.MaxEvents || (f.logBytes > f.cfg.MaxBytes && len(f.events)-drop > 1) {
		f.floor = f.events[drop].rv
		f.logBytes -= len(f.events[drop].frame)
		// Readers copy frames out under f.mu and hold no slice of the log: the dropped slots
		// are cleared (their frames freed) and the log resliced, not copied, at every event of
		// a full log; append moves the rest to a new array when it grows.
		f.events[drop] = event{}
		drop++
	}
	f.events = f.events[drop:]
	f.base += uint64(drop)
	f.changed()
}

func (f *Feed) changed() {
	f.list = nil
	close(f.notify)
	f.notify = make(chan struct{})
}

// Add, Update and Delete are the Reflector's events.
func (f *Feed) Add(obj any) error    { return f.apply("ADDED", obj) }
func (f *Feed) Update(obj any) error { return f.apply("MODIFIED", obj) }
func (f *Feed) Delete(obj any) error { return f.apply("DELETED", obj) }

// Replace is a new list. The first is the feed's state. A later one is a relist of the feed's
// own watch (the API server no longer had its resourceVersion: it restarted, or etcd compacted
// past it), and the difference between the state and the list goes into the log as events:
// open watches go on, and an agent lists nothing. Ending them instead sent every agent of the
// cluster back to list the kind at once, on every restart of the API server.
func (f *Feed) Replace(items []any, rvs string) error {
	rv, err := ParseRV(rvs)
	if err != nil {
		return fmt.Errorf("list of %s: %w", f.cfg.Kind.Kind, err)
	}
	objects := make(map[string][]byte, len(items))
	versions := make(map[string]uint64, len(items))
	for _, obj := range items {
		key, orv, raw, err := f.encode(obj)
		if err != nil {
			return err
		}
		objects[key], versions[key] = raw, orv
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced {
		f.synced = true
		f.objects, f.rv, f.floor = objects, rv, rv
		f.changed()
		return nil
	}
	// The feed holds every change up to f.rv, so what changed since has a later resourceVersion
	// (the max() keeps the log in order whatever the list says).
	rv = max(rv, f.rv)
	var diff []event
	for key, raw := range objects {
		old, ok := f.objects[key]
		switch {
		case !ok:
			diff = append(diff, event{rv: max(versions[key], f.rv), frame: Frame("ADDED", raw)})
		case !bytes.Equal(old, raw):
			diff = append(diff, event{rv: max(versions[key], f.rv), frame: Frame("MODIFIED", raw)})
		}
	}
	slices.SortStableFunc(diff, func(a, b event) int { return cmp.Compare(a.rv, b.rv) })
	var gone []string
	for key := range f.objects {
		if _, ok := objects[key]; !ok {
			gone = append(gone, key)
		}
	}
	slices.Sort(gone)
	for _, key := range gone {
		old := f.objects[key]
		// When it went is unknown: at the list's resourceVersion, as a watch reports a deletion
		// at its own (a client resumes from the last event's).
		raw, err := withResourceVersion(old, rv)
		if err != nil {
			return fmt.Errorf("relist of %s: %s: %w", f.cfg.Kind.Kind, key, err)
		}
		diff = append(diff, event{rv: rv, frame: Frame("DELETED", raw)})
	}
	f.objects = objects
	if len(diff) > 0 {
		f.append(diff...)
	}
	if rv > f.rv {
		f.rv = rv
		f.changed()
	}
	if f.cfg.OnRelist != nil {
		f.cfg.OnRelist(len(diff))
	}
	return nil
}

// withResourceVersion is the encoded object raw with its metadata.resourceVersion set to rv.
func withResourceVersion(raw []byte, rv uint64) ([]byte, error) {
	var obj, meta map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(obj["metadata"], &meta); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	meta["resourceVersion"] = json.RawMessage(strconv.Quote(strconv.FormatUint(rv, 10)))
	var err error
	if obj["metadata"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// UpdateResourceVersion takes a bookmark's resourceVersion: nothing changed up to it. The
// floor stays: a watch from before it still gets every event the log holds after it.
func (f *Feed) UpdateResourceVersion(rvs string) {
	rv, err := ParseRV(rvs)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rv > f.rv {
		f.rv = rv
		f.changed()
	}
}

// The rest of cache.Store: the Reflector does not read the store back.
func (f *Feed) List() []any { return nil }
func (f *Feed) ListKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.objects))
	for k := range f.objects {
		keys = append(keys, k)
	}
	return keys
}
func (f *Feed) Get(any) (any, bool, error)         { return nil, false, nil }
func (f *Feed) GetByKey(string) (any, bool, error) { return nil, false, nil }
func (f *Feed) Resync() error                      { return nil }

// EncodedList is the current state as a list response (the kind's List, with its
// resourceVersion), built once per state whatever the number of agents asking.
func (f *Feed) EncodedList() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.list != nil {
		return f.list
	}
	size := 128
	for _, raw := range f.objects {
		size += len(raw) + 1
	}
	var b bytes.Buffer
	b.Grow(size)
	fmt.Fprintf(&b, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"},"items":[`, f.cfg.Kind.Kind+"List", f.cfg.Kind.GroupVersion().String(), f.rv)
	first := true
	for _, raw := range f.objects {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(raw)
	}
	b.WriteString("]}\n")
	f.list = b.Bytes()
	return f.list
}

// Cursor reads the log from a resourceVersion on.
type Cursor struct {
	f     *Feed
	next  uint64 // sequence number of the next event to hand out
	after uint64 // hand out only events after this resourceVersion
}

// Since opens a cursor on the events after rv; ErrGone when the log does not reach back to rv.
func (f *Feed) Since(rv uint64) (*Cursor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced || rv < f.floor {
		return nil, ErrGone
	}
	i, _ := slices.BinarySearchFunc(f.events, rv+1, func(e event, rv uint64) int {
		switch {
		case e.rv < rv:
			return -1
		case e.rv > rv:
			return 1
		}
		return 0
	})
	return &Cursor{f: f, next: f.base + uint64(i), after: rv}, nil
}

// Snapshot is the current state, as ADDED frames, and a cursor on the events after it.
func (f *Feed) Snapshot() ([][]byte, uint64, *Cursor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	frames := make([][]byte, 0, len(f.objects))
	for _, raw := range f.objects {
		frames = append(frames, Frame("ADDED", raw))
	}
	return frames, f.rv, &Cursor{f: f, next: f.base + uint64(len(f.events)), after: f.rv}
}

// WaitFor waits until the state is at rv or later; false when ctx ends first.
func (f *Feed) WaitFor(ctx context.Context, rv uint64) bool {
	for {
		f.mu.Lock()
		ok, wait := f.synced && f.rv >= rv, f.notify
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-wait:
		}
	}
}

// Next returns the next events' frames, waiting for one until ctx ends (nil, ctx.Err()) or
// idle fires (nil, nil). ErrGone: the reader fell behind the log.
func (c *Cursor) Next(ctx context.Context, idle <-chan time.Time) ([][]byte, error) {
	f := c.f
	for {
		f.mu.Lock()
		if c.next < f.base {
			f.mu.Unlock()
			return nil, ErrGone
		}
		end := f.base + uint64(len(f.events))
		var out [][]byte
		for _, ev := range f.events[c.next-f.base:] {
			// After a move between feeds (another replica, the API server) the client may have
			// seen events this log holds: those are skipped.
			if ev.rv > c.after {
				out = append(out, ev.frame)
			}
		}
		c.next = end
		wait := f.notify
		f.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-idle:
			return nil, nil
		case <-wait:
		}
	}
}

// CaughtUp returns the feed's resourceVersion when the cursor has handed out every event up to
// it: a bookmark there lets the client resume there, on any replica, even when its kind has been
// quiet since long before the replica's log begins.
func (c *Cursor) CaughtUp() (uint64, bool) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.next != f.base+uint64(len(f.events)) {
		return 0, false
	}
	return f.rv, true
}

// Bookmark is a bookmark frame at rv; initialEnd marks the end of a watch's initial events.
func Bookmark(kind schema.GroupVersionKind, rv uint64, initialEnd bool) []byte {
	obj := metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: kind.Kind, APIVersion: kind.GroupVersion().String()},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatUint(rv, 10)}}
	if initialEnd {
		obj.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	raw, _ := json.Marshal(&obj) // a struct of strings: cannot fail
	return Frame("BOOKMARK", raw)
}
