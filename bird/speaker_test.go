package bird

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// TestSpeakerReconciler: the speaker starts with this node's identity, is left alone while the
// identity stays, and is restarted (a new one, the old stopped) when it changes; a speaker whose
// Start failed is retried, not replaced.
func TestSpeakerReconciler(t *testing.T) {
	a := netip.MustParseAddr
	id := peers.Speaker{RouterID: a("198.51.100.1"), ASN: 64512, ListenPort: 179,
		Address: ipfamily.PairOf(netip.MustParsePrefix("198.51.100.1/24"), netip.Prefix{})}
	id2 := id
	id2.ASN = 65001
	fs := &fakeSpeakers{prepare: func(f *fakeSpeaker) {
		if f.id == 1 { // the second speaker fails its first start
			f.fail["start"] = 1
		}
	}}
	r := speakerReconciler{log: testLogger(), newSpeaker: fs.newSpeaker, onEvent: func(speaker.Event) {}}
	ctx := context.Background()
	for i, s := range []struct {
		want    peers.Speaker
		stopped bool
		fail    bool
		calls   []string // of every speaker made so far, in order made
	}{
		{want: id, calls: []string{"start 0 198.51.100.1"}},
		{want: id},
		{want: id2, stopped: true, fail: true, calls: []string{"stop 0", "start 1 198.51.100.1"}},
		{want: id2, calls: []string{"start 1 198.51.100.1"}},
		{want: id2},
	} {
		stopped, err := r.reconcile(ctx, s.want)
		if stopped != s.stopped || (err != nil) != s.fail {
			t.Errorf("step %d: stopped %v, error %v", i, stopped, err)
		}
		var calls []string
		for _, f := range fs.made {
			calls = append(calls, f.takeCalls()...)
		}
		if !slices.Equal(calls, s.calls) {
			t.Errorf("step %d: calls %q, want %q", i, calls, s.calls)
		}
	}
	if len(fs.made) != 2 || r.running != fs.made[1] || r.cfg != id2 {
		t.Errorf("%d speakers made, running %p (want the second), identity %+v", len(fs.made), r.running, r.cfg)
	}
}
