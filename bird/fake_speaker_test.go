package bird

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"log/slog"
	"testing"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// fakeSpeaker is a speaker.Speaker that keeps what it is told and records every call that
// changes something, in order, for the reconcilers' table tests.
type fakeSpeaker struct {
	mu      sync.Mutex
	calls   []string
	id      int // tells the speakers of one factory apart in calls
	started bool
	cfg     peers.Speaker
	peers   map[netip.Addr]peers.Peer
	paths   map[netip.Prefix]netip.Addr
	policy  *speaker.Policy
	watch   func(speaker.Event)
	// fail makes the calls whose record starts with a key fail, as often as its value says.
	fail map[string]int
}

func newFakeSpeaker() *fakeSpeaker {
	return &fakeSpeaker{peers: map[netip.Addr]peers.Peer{}, paths: map[netip.Prefix]netip.Addr{}, fail: map[string]int{}}
}

// record notes a call and tells whether it is to fail.
func (f *fakeSpeaker) record(format string, args ...any) error {
	call := fmt.Sprintf(format, args...)
	f.calls = append(f.calls, call)
	for prefix, n := range f.fail {
		if n > 0 && strings.HasPrefix(call, prefix) {
			f.fail[prefix] = n - 1
			return fmt.Errorf("%s: injected failure", call)
		}
	}
	return nil
}

// takeCalls returns the calls since the last take. Peers are added in no particular order
// (neighborReconciler): each run of additions is sorted.
func (f *fakeSpeaker) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	for i := 0; i < len(c); {
		j := i
		for j < len(c) && strings.HasPrefix(c[j], "add peer ") {
			j++
		}
		if j == i {
			i++
			continue
		}
		slices.SortFunc(c[i:j], func(a, b string) int {
			return netip.MustParseAddr(strings.TrimPrefix(a, "add peer ")).Compare(netip.MustParseAddr(strings.TrimPrefix(b, "add peer ")))
		})
		i = j
	}
	return c
}

func (f *fakeSpeaker) Start(_ context.Context, s peers.Speaker) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("start %d %s", f.id, s.RouterID); err != nil {
		return err
	}
	f.started, f.cfg = true, s
	return nil
}

func (f *fakeSpeaker) Stop(_ context.Context, restart bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = false
	return f.record("stop %d", f.id)
}

func (f *fakeSpeaker) AddPeer(_ context.Context, p peers.Peer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("add peer %s", p.Address); err != nil {
		return err
	}
	f.peers[p.Address] = p
	return nil
}

func (f *fakeSpeaker) UpdateBFD(_ context.Context, p peers.Peer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("update bfd %s %v", p.Address, p.BFD.Enabled); err != nil {
		return err
	}
	f.peers[p.Address] = p
	return nil
}

func (f *fakeSpeaker) DeletePeer(_ context.Context, addr netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("delete peer %s", addr); err != nil {
		return err
	}
	delete(f.peers, addr)
	return nil
}

func (f *fakeSpeaker) AddPath(_ context.Context, p netip.Prefix, nh netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("add path %s via %s", p, nh); err != nil {
		return err
	}
	f.paths[p] = nh
	return nil
}

func (f *fakeSpeaker) DeletePath(_ context.Context, p netip.Prefix, nh netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("delete path %s via %s", p, nh); err != nil {
		return err
	}
	delete(f.paths, p)
	return nil
}

func (f *fakeSpeaker) SetPolicy(_ context.Context, p speaker.Policy) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("policy"); err != nil {
		return err
	}
	f.policy = &p
	return nil
}

func (f *fakeSpeaker) Watch(_ context.Context, fn func(speaker.Event)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watch = fn
	return nil
}

func (f *fakeSpeaker) Peers(context.Context) ([]speaker.PeerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []speaker.PeerState
	for _, a := range slices.SortedFunc(maps.Keys(f.peers), netip.Addr.Compare) {
		out = append(out, speaker.PeerState{Address: a, State: "active"})
	}
	return out, nil
}

func (f *fakeSpeaker) Accepted(context.Context) (map[netip.Addr]map[string]uint64, error) {
	return nil, nil
}

// emit sends e to the watcher, as the speaker's watch goroutine would.
func (f *fakeSpeaker) emit(e speaker.Event) {
	f.mu.Lock()
	fn := f.watch
	f.mu.Unlock()
	fn(e)
}

// fakeSpeakers is a NewSpeaker that makes fake speakers and keeps them, the last one current.
type fakeSpeakers struct {
	mu   sync.Mutex
	made []*fakeSpeaker
	// prepare, when set, is applied to each speaker made.
	prepare func(*fakeSpeaker)
}

func (fs *fakeSpeakers) newSpeaker() (speaker.Speaker, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := newFakeSpeaker()
	f.id = len(fs.made)
	if fs.prepare != nil {
		fs.prepare(f)
	}
	fs.made = append(fs.made, f)
	return f, nil
}

func (fs *fakeSpeakers) last() *fakeSpeaker {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.made[len(fs.made)-1]
}

// newFakeBird is the agent of node self over fake speakers, its learned routes in a routeTable.
// Nothing runs it: a test drives its passes with CompleteDeferredWork.
func newFakeBird(t testing.TB, self string, cfgs ...func(*Config)) (*Bird, *fakeSpeakers, *routeTable) {
	t.Helper()
	fs := &fakeSpeakers{}
	routes := newRouteTable()
	cfg := Config{NodeName: self, Logger: testLogger(), Routes: routes.apply,
		NewSpeaker: func(*slog.Logger, string) (speaker.Speaker, error) { return fs.newSpeaker() }}
	for _, f := range cfgs {
		f(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, fs, routes
}

// pass runs one pass and fails the test on an error.
func pass(t testing.TB, b *Bird) {
	t.Helper()
	if err := b.CompleteDeferredWork(context.Background()); err != nil {
		t.Fatal(err)
	}
}
