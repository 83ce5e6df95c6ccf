package server

import "sync"

// outQueue is a peer's queue of routes to send, from the server's handlers to the session's
// sender: tabby's change (TABBY.md). Upstream's InfiniteChannel has an unbuffered input and a
// pump goroutine, so each message cost the handler a hand-off to the pump and the pump one to
// the sender; a route reflected to 1,000 clients was 2,000 goroutine switches, in series in
// the handler that propagated it. A push here takes a lock and wakes the sender once for all
// that has queued up since it last took.
type outQueue struct {
	mu     sync.Mutex
	msgs   []*fsmOutgoingMsg
	closed bool
	// ready holds a token while msgs may be non-empty.
	ready chan struct{}
}

func newOutQueue() *outQueue {
	return &outQueue{ready: make(chan struct{}, 1)}
}

// push queues m; after close it drops it.
func (q *outQueue) push(m *fsmOutgoingMsg) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns up to max queued messages, oldest first, and leaves the token for the rest.
func (q *outQueue) take(max int) []*fsmOutgoingMsg {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) <= max {
		msgs := q.msgs
		q.msgs = nil
		return msgs
	}
	msgs := make([]*fsmOutgoingMsg, max)
	copy(msgs, q.msgs)
	q.msgs = append(q.msgs[:0:0], q.msgs[max:]...)
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return msgs
}

// drain drops what is queued.
func (q *outQueue) drain() {
	q.mu.Lock()
	q.msgs = nil
	q.mu.Unlock()
}

// close drops what is queued and what is pushed later.
func (q *outQueue) close() {
	q.mu.Lock()
	q.closed, q.msgs = true, nil
	q.mu.Unlock()
}
