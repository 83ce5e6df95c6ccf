package client

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/observe"
)

// Flows sends the flow records of every node (or f.Node's alone) that match f: without follow,
// every node's kept records merged in time order; with follow, those and then each new one as
// its node sends it, until ctx ends. A node that fails is reported (Options.OnNodeError, else
// in the returned error) while the others go on; a following stream that breaks is opened
// again from its last record. It returns send's error, the nodes' errors when none answered,
// or, following, ctx's: it is a flow.Source of the whole cluster.
func (c *Client) Flows(ctx context.Context, f flow.Filter, follow bool, send func(flow.Record) error) error {
	if err := f.Check(); err != nil {
		return err
	}
	targets, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	if f.Node != "" {
		targets = slices.DeleteFunc(targets, func(t target) bool { return t.node != f.Node })
		if len(targets) == 0 {
			return fmt.Errorf("node %q: no such Node", f.Node)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &merge{c: c, send: send, stop: cancel, follow: follow}
	onNodes(targets, func(t target) { m.node(ctx, t, f) })
	if m.sendErr != nil {
		return m.sendErr
	}
	if !follow {
		slices.SortStableFunc(m.kept, func(a, b flow.Record) int {
			return cmp.Or(a.End.Compare(b.End), cmp.Compare(a.Node, b.Node))
		})
		for _, r := range m.kept {
			if err := send(r); err != nil {
				return err
			}
		}
	}
	if m.answered == 0 || c.opts.OnNodeError == nil {
		if err := errors.Join(m.errs...); err != nil {
			return err
		}
	}
	if follow {
		return ctx.Err()
	}
	return nil
}

// merge is one Flows call: it serialises send over the nodes' streams and collects their
// failures.
type merge struct {
	c      *Client
	send   func(flow.Record) error
	stop   context.CancelFunc
	follow bool

	mu       sync.Mutex
	kept     []flow.Record // without follow: sorted and sent at the end
	sendErr  error
	errs     []error
	answered int // nodes that streamed at least once
}

func (m *merge) record(r flow.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sendErr != nil {
		return m.sendErr
	}
	if !m.follow {
		m.kept = append(m.kept, r)
		return nil
	}
	if err := m.send(r); err != nil {
		m.sendErr = err
		m.stop()
		return err
	}
	return nil
}

func (m *merge) failed(node string, err error) {
	m.mu.Lock()
	m.errs = append(m.errs, &NodeError{Node: node, Err: err})
	m.mu.Unlock()
	if m.c.opts.OnNodeError != nil {
		m.c.opts.OnNodeError(node, err)
	}
}

// Backoff of a following stream opened again.
const (
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// node streams one node; following, it opens the stream again after a break (not after a
// refusal) from the end of the last record it got.
func (m *merge) node(ctx context.Context, t target, f flow.Filter) {
	var at resume
	wait := retryFirst
	for {
		opened, err := m.c.stream(ctx, t, f, m.follow, at.since(), func(r flow.Record) error {
			if !at.fresh(r) {
				return nil
			}
			return m.record(r)
		})
		if opened {
			m.mu.Lock()
			m.answered++
			m.mu.Unlock()
			wait = retryFirst
		}
		if ctx.Err() != nil || err == nil && !m.follow {
			return
		}
		if err == nil {
			err = errors.New("the stream ended")
		}
		m.failed(t.node, err)
		var ref *refusal
		if !m.follow || errors.As(err, &ref) || errors.Is(err, errNoEndpoint) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

// resume is where a node's stream got to, so that one opened again sends nothing twice and
// loses nothing: the records of a closed interval share their End, and a break can fall
// between them.
type resume struct {
	last   time.Time
	atLast map[flow.Record]bool // the records sent whose End is last
}

// since is what to ask a stream opened again for: the records that end at last or later.
func (r *resume) since() time.Time {
	if r.last.IsZero() {
		return r.last
	}
	return r.last.Add(-time.Nanosecond)
}

// fresh tells whether rec was not sent yet, and notes it as sent.
func (r *resume) fresh(rec flow.Record) bool {
	switch {
	case rec.End.Before(r.last) || r.atLast[rec]:
		return false
	case rec.End.After(r.last):
		r.last = rec.End
		r.atLast = map[flow.Record]bool{}
	}
	r.atLast[rec] = true
	return true
}

// stream reads one node's records into send; opened tells whether the node answered 200.
func (c *Client) stream(ctx context.Context, t target, f flow.Filter, follow bool, since time.Time, send func(flow.Record) error) (opened bool, err error) {
	q := url.Values{}
	for k, v := range map[string]string{"from": f.From, "to": f.To, "verdict": string(f.Verdict)} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if follow {
		q.Set("follow", "1")
	}
	if !since.IsZero() {
		q.Set("since", since.Format(time.RFC3339Nano))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := c.get(ctx, t, observe.FlowsPath, q)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	// A following stream carries a heartbeat: silence for three of them is a dead stream (a
	// node gone without closing its connections).
	var idle *time.Timer
	var idleFor time.Duration
	if follow {
		hb, err := time.ParseDuration(resp.Header.Get(observe.HeartbeatHeader))
		if err != nil || hb <= 0 {
			hb = 15 * time.Second
		}
		idleFor = 3*hb + c.opts.Timeout
		idle = time.AfterFunc(idleFor, func() {
			cancel(fmt.Errorf("nothing, not even a heartbeat, for %s: the stream is dead", idleFor))
		})
		defer idle.Stop()
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		if idle != nil {
			idle.Reset(idleFor)
		}
		b := lines.Bytes()
		if len(b) == 0 {
			continue
		}
		var r flow.Record
		if err := json.Unmarshal(b, &r); err != nil {
			return true, fmt.Errorf("%s: a line that is no flow record: %w", t.addr, err)
		}
		if err := send(r); err != nil {
			return true, err
		}
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return true, cause
	}
	if err := lines.Err(); err != nil {
		return true, fmt.Errorf("%s: %w", t.addr, err)
	}
	return true, nil
}

// BGP asks every node for its BGP status at once; a node that does not answer within the
// client's timeout has Err set. The error is for the node list alone.
func (c *Client) BGP(ctx context.Context) ([]status.NodeReply, error) {
	targets, err := c.nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]status.NodeReply, len(targets))
	idx := map[string]int{}
	for i, t := range targets {
		idx[t.node] = i
	}
	onNodes(targets, func(t target) {
		r := status.NodeReply{Node: t.node}
		reply, err := c.bgp(ctx, t)
		if err != nil {
			r.Err = err.Error()
		} else {
			r.Reply = reply
		}
		out[idx[t.node]] = r
	})
	return out, nil
}

func (c *Client) bgp(ctx context.Context, t target) (*status.PeersReply, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	resp, err := c.get(ctx, t, observe.BGPPath, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r status.PeersReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: BGP status: %w", t.addr, err)
	}
	return &r, nil
}
