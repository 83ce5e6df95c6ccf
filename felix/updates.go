package felix

import "sync"

// updateQueue carries messages from any goroutine (informer handlers, the syncer, the BGP
// speaker) to the loop, which hands them to the managers in order: managers are only ever
// touched by the loop, so they need no locks of their own.
type updateQueue struct {
	mu   sync.Mutex
	msgs []any
	kick func()
}

// push queues msgs, in order, and wakes the loop once; no message wakes nothing.
func (q *updateQueue) push(msgs ...any) {
	if len(msgs) == 0 {
		return
	}
	q.mu.Lock()
	q.msgs = append(q.msgs, msgs...)
	q.mu.Unlock()
	q.kick()
}

// take returns every queued message and empties the queue.
func (q *updateQueue) take() []any {
	q.mu.Lock()
	defer q.mu.Unlock()
	msgs := q.msgs
	q.msgs = nil
	return msgs
}

// OnUpdate is felix's input: it queues msg and wakes the loop, which hands it to every manager
// in the order it was sent. The messages are the model's changes (apis/model: this node's
// NodeUpdate, PoolUpdate/PoolRemove, BlockUpdate/BlockRemove, WorkloadUpdate/WorkloadRemove,
// RouteUpdate/RouteRemove from the BGP speaker, InSync) and the policy messages (messages.go).
// It is safe to call from any goroutine.
func (f *Felix) OnUpdate(msg any) { f.updates.push(msg) }

// OnUpdates is OnUpdate for a batch (the syncer's pass), queued in order with one wake-up.
func (f *Felix) OnUpdates(msgs []any) { f.updates.push(msgs...) }
