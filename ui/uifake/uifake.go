// Package uifake is a ui.Backend held in memory for tests of the web view: records pushed by
// the test reach the streams that follow, and the BGP status is what the test last set.
package uifake

import (
	"context"
	"sync"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/bird/status"
)

// Backend is safe for concurrent use.
type Backend struct {
	mu      sync.Mutex
	records []flow.Record
	subs    map[chan flow.Record]struct{}
	bgp     []status.NodeReply
	bgpErr  error
}

// Push records r and sends it to every stream that follows.
func (b *Backend) Push(r flow.Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.records = append(b.records, r)
	for c := range b.subs {
		c <- r
	}
}

// SetBGP sets what BGP returns.
func (b *Backend) SetBGP(replies []status.NodeReply, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bgp, b.bgpErr = replies, err
}

// Followers is how many streams follow.
func (b *Backend) Followers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// BGP returns what SetBGP set.
func (b *Backend) BGP(context.Context) ([]status.NodeReply, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bgp, b.bgpErr
}

// Flows sends the pushed records that match f, then with follow each new one until ctx ends.
func (b *Backend) Flows(ctx context.Context, f flow.Filter, follow bool, send func(flow.Record) error) error {
	// Large enough for any test's pushes: Push holds the lock while it hands a record over.
	c := make(chan flow.Record, 1024)
	b.mu.Lock()
	kept := append([]flow.Record(nil), b.records...)
	if follow {
		if b.subs == nil {
			b.subs = map[chan flow.Record]struct{}{}
		}
		b.subs[c] = struct{}{}
		defer func() {
			b.mu.Lock()
			delete(b.subs, c)
			b.mu.Unlock()
		}()
	}
	b.mu.Unlock()
	return flow.Stream(ctx, f, kept, follow, c, send)
}
