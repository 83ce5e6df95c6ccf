package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tabbynet/tabby/hack/bench/benchutil"
)

// result is what one reflector implementation measured; err says where it stopped.
type result struct {
	sessionsUp time.Duration // start → all 2N sessions established (seen by the clients)
	// resets: sessions that went down and came back until routesUp (a reflector too busy to
	// read a client's keepalives lets its hold timer expire).
	resets int64
	// resetWhy: why those sessions ended, as the clients saw it.
	resetWhy string
	// clientHold: of those, the sessions a client ended because the reflector sent nothing
	// (not even a keepalive) within the hold time.
	clientHold int64
	routesUp   time.Duration // start → every client holds every other client's block
	// bothUp: start → every client holds every block from both reflectors; -1: not within the
	// settle time after routesUp, missingBoth (session, block) pairs short, as missingWhat says.
	bothUp      time.Duration
	missingBoth int64
	missingWhat string
	// nearlyUp: start → 99.9% of the blocks at the clients; routesUp is -1 when the rest
	// (missingCovered) had not come settle after the last progress.
	nearlyUp       time.Duration
	missingCovered int64
	// Per reflector: CPU from its start to convergence, peak RSS (VmHWM) until then, RSS and
	// CPU share over the idle window after it.
	convCPU  []time.Duration
	convPeak []int
	idleRSS  []int
	idleAnon []int // RssAnon: RSS less the binary's pages
	idleCPU  []float64
	last     []time.Duration // per sample: announcement → the last other client holds it
	each     []time.Duration // per sample and client
	// gone, goneEach: the same for the sample's withdrawal, until no reflector's session of
	// the last other client (of each) holds it.
	gone     []time.Duration
	goneEach []time.Duration
	// status: the operator's look at the first reflector after the samples, each call (tabby: what
	// `tabbyctl node status` asks its BGP socket; BIRD2: `birdc show protocols all`); scrape:
	// a GET of tabby's /metrics.
	status, scrape []time.Duration
	progress       string // where convergence stood when it failed
	err            error
	// stopped: SIGTERM to both reflectors → both exited; stopErr: they did not stop cleanly
	// (measured figures stand).
	stopped time.Duration
	stopErr error
	notes   []string
}

// converge waits until every session is established and every client holds every other
// client's initial block (from either reflector), and records the reflectors' cost until then;
// then it gives the reflectors settle more to deliver every block on every session.
func (w *world) converge(ctx context.Context, t0 time.Time, pids func() []int, r *result) error {
	n := int64(len(w.clients))
	wantSess, wantCovered, wantBoth := n*int64(len(w.rrs)), n*(n-1), n*(n-1)*int64(len(w.rrs))
	deadline := time.NewTimer(w.o.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last int64
	lastChange := t0
	opened, ends := w.inj.opened.Load(), w.inj.endsSoFar()
	resets := func() {
		r.resets = w.inj.opened.Load() - opened - w.inj.established.Load()
		d := w.inj.endsSince(ends)
		r.clientHold, r.resetWhy = d[endHold], describeEnds(d)
	}
	for {
		est, got := w.inj.established.Load(), w.inj.covered.Load()
		now := time.Now()
		if r.sessionsUp == 0 && est == wantSess {
			r.sessionsUp = now.Sub(t0)
		}
		if got != last {
			last, lastChange = got, now
		}
		if r.nearlyUp == 0 && got*1000 >= wantCovered*999 {
			r.nearlyUp = now.Sub(t0)
		}
		if est == wantSess && got == wantCovered {
			r.routesUp = now.Sub(t0)
			break
		}
		// A few routes that never come (a reflector that lost them) must not hide the rest
		// of the figures: the table shows how many.
		if est == wantSess && r.nearlyUp > 0 && now.Sub(lastChange) > w.o.settle {
			r.routesUp, r.missingCovered = -1, wantCovered-got
			r.missingWhat = w.inj.missing()
			break
		}
		r.progress = fmt.Sprintf("%d/%d sessions, %d/%d blocks at the clients after %v", est, wantSess, got, wantCovered, now.Sub(t0).Round(time.Second))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			// What it cost until then is a figure too.
			_ = r.cost(pids())
			resets()
			return fmt.Errorf("not converged after %v: %s: %s", w.o.timeout, r.progress, w.inj.missing())
		case <-tick.C:
		}
	}
	r.progress = ""
	resets()
	if err := r.cost(pids()); err != nil {
		return err
	}
	if r.routesUp < 0 {
		r.bothUp, r.missingBoth = -1, wantBoth-w.inj.received.Load()
	}
	settle := time.NewTimer(w.o.settle)
	defer settle.Stop()
	for r.bothUp == 0 {
		if w.inj.received.Load() == wantBoth {
			r.bothUp = time.Since(t0)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-settle.C:
			r.missingBoth = wantBoth - w.inj.received.Load()
			r.missingWhat = w.inj.missing()
			r.bothUp = -1
		case <-tick.C:
		}
	}
	if bad := w.inj.badNextHop.Load(); bad > 0 {
		return fmt.Errorf("%d routes arrived with the wrong next hop, first: %v", bad, w.inj.firstBad.Load())
	}
	return nil
}

// cost records the reflectors' CPU time and peak RSS so far.
func (r *result) cost(pids []int) error {
	for _, pid := range pids {
		cpu, err := benchutil.CPUTime(pid)
		if err != nil {
			return err
		}
		peak, err := benchutil.StatusKB(pid, "VmHWM:")
		if err != nil {
			return err
		}
		r.convCPU, r.convPeak = append(r.convCPU, cpu), append(r.convPeak, peak)
	}
	return nil
}

// idle samples the reflectors' CPU over the idle window and their RSS at its end.
func (w *world) idle(ctx context.Context, pids []int, r *result) error {
	before := make([]int64, len(pids))
	for i, pid := range pids {
		var err error
		if before[i], err = benchutil.CPUTicks(pid); err != nil {
			return err
		}
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(w.o.idle):
	}
	elapsed := time.Since(start).Seconds()
	for i, pid := range pids {
		after, err := benchutil.CPUTicks(pid)
		if err != nil {
			return err
		}
		rss, err := benchutil.StatusKB(pid, "VmRSS:")
		if err != nil {
			return err
		}
		anon, err := benchutil.StatusKB(pid, "RssAnon:")
		if err != nil {
			return err
		}
		r.idleAnon = append(r.idleAnon, anon)
		r.idleRSS = append(r.idleRSS, rss)
		r.idleCPU = append(r.idleCPU, float64(after-before[i])/100/elapsed*100)
	}
	return nil
}

// samples announces one new block at a time from one client (on both its sessions) and waits
// until every other client holds it from at least one reflector.
func (w *world) samples(ctx context.Context, r *result) error {
	n := len(w.clients)
	settle := func() error {
		// The second reflector's copy and the sibling's are still on their way.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
			return nil
		}
	}
	for k := range w.o.samples {
		b := n + k
		owner := w.inj.clients[w.inj.owner[b]]
		// step sends the block's change and waits until every other client shows it.
		step := func(what string, send func(*client, int) (int, error), at func(*client) (time.Time, bool)) (time.Duration, []time.Duration, error) {
			t0 := time.Now()
			if sent, err := send(owner, b); err != nil || sent != len(w.rrs) {
				return 0, nil, fmt.Errorf("%s %s from %s: sent on %d sessions: %v", what, w.inj.blocks[b], owner.addr, sent, err)
			}
			last, each, err := w.waitClients(ctx, owner, t0, at)
			if err != nil {
				return 0, nil, fmt.Errorf("%s %s from %s: %w", what, w.inj.blocks[b], owner.addr, err)
			}
			return last, each, settle()
		}
		last, each, err := step("announce", w.inj.announce, func(c *client) (time.Time, bool) {
			at := w.inj.arrival(c, b)
			return at, !at.IsZero()
		})
		if err != nil {
			return err
		}
		r.last = append(r.last, last)
		r.each = append(r.each, each...)
		last, each, err = step("withdraw", w.inj.withdraw, func(c *client) (time.Time, bool) { return w.inj.goneAt(c, b) })
		if err != nil {
			return err
		}
		r.gone = append(r.gone, last)
		r.goneEach = append(r.goneEach, each...)
	}
	return nil
}

// waitClients polls until at reports every client but owner, for 10 s at most, and returns
// the latest of their times since t0 and each of them.
func (w *world) waitClients(ctx context.Context, owner *client, t0 time.Time, at func(*client) (time.Time, bool)) (last time.Duration, each []time.Duration, err error) {
	deadline := t0.Add(10 * time.Second)
	for {
		last, each = 0, each[:0]
		missing := 0
		for _, c := range w.inj.clients {
			if c == owner {
				continue
			}
			t, ok := at(c)
			if !ok {
				missing++
				continue
			}
			d := t.Sub(t0)
			each = append(each, d)
			last = max(last, d)
		}
		if missing == 0 {
			return last, each, nil
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("%d of %d clients not there after 10s", missing, len(w.inj.clients)-1)
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// quiesce drops every injector session and waits until none is left, for the next reflector
// implementation to start from the same state.
func (w *world) quiesce(ctx context.Context) error {
	w.inj.dropAll()
	deadline := time.Now().Add(30 * time.Second)
	for w.inj.established.Load() != 0 || w.inj.received.Load() != 0 || w.inj.covered.Load() != 0 {
		if time.Now().After(deadline) {
			return errors.New("injector sessions still open 30s after closing them")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	w.inj.reset()
	return nil
}

// statusCalls is how many times the operator's status and the metrics scrape are timed.
const statusCalls = 5

// timeCalls times statusCalls calls of call, one after the other.
func timeCalls(ctx context.Context, what string, call func(context.Context) error) ([]time.Duration, error) {
	var out []time.Duration
	for range statusCalls {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		err := call(cctx)
		cancel()
		if err != nil {
			return out, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}
