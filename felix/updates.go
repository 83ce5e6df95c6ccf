package felix

import "sync"

// updateQueue carries messages from any goroutine (informer handlers, the syncer) to the loop,
// which hands them to the managers in order: managers are only ever touched by the loop, so
// they need no locks of their own.
type updateQueue struct {
	mu   sync.Mutex
	msgs []any
	kick func()
}

func (q *updateQueue) push(msg any) {
	q.mu.Lock()
	q.msgs = append(q.msgs, msg)
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

// OnUpdate queues msg for the managers (see messages.go) and wakes the loop. It is safe to call
// from any goroutine.
func (f *Felix) OnUpdate(msg any) { f.updates.push(msg) }
