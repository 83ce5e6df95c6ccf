package felix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/routetable"
)

// dispatch hands msg to every manager. model.InSync is felix's too: from then on, what no
// manager wants any more is removed from the kernel.
func (f *Felix) dispatch(msg any) {
	if _, ok := msg.(model.InSync); ok && !f.inSync {
		f.inSync = true
		f.rt.SetHoldDeletes(false)
		f.holdDeletes(false)
		f.log.Info("in sync: stale routes, NAT rules and tunnel state may now be removed")
	}
	for _, m := range f.managers {
		m.OnUpdate(msg)
	}
}

func (f *Felix) onRoute(u netlink.RouteUpdate) {
	f.rt.OnRouteUpdate(u)
}

func (f *Felix) onLink(u netlink.LinkUpdate) {
	f.rt.OnLinkUpdate(u)
	a := u.Link.Attrs()
	f.dispatch(routetable.LinkUpdate{Name: a.Name, Index: a.Index, Gone: u.Header.Type == unix.RTM_DELLINK})
}

// apply runs a pass and counts the failed ones: each is retried, and the count is what the
// chart's alert watches, so a node that keeps failing is seen even while its retries hide it.
func (f *Felix) apply(ctx context.Context) error {
	err := f.applyPass(ctx)
	if err != nil && ctx.Err() == nil {
		f.metrics.ApplyErrors.Inc()
	}
	return err
}

// applyPass is one pass: re-read the kernel if due, hand the managers what changed (the queued
// messages, the host's routes), let each state its part, then write the iptables tables and
// ipsets and the routes.
func (f *Felix) applyPass(ctx context.Context) error {
	f.dpMu.Lock()
	defer f.dpMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	resync := f.rt.ResyncQueued()
	if err := f.rt.Sync(); err != nil {
		f.metrics.NetlinkErrors.Inc()
		return fmt.Errorf("read kernel state: %w", err)
	}
	if resync {
		f.dispatch(routetable.LinksResync{Links: f.rt.Links()})
	}
	// Taken before the messages are: a change after it is this pass's or the next one's, and
	// counts from its own time in the next.
	if since := f.changedAt.Swap(0); since != 0 {
		defer func() { f.metrics.ApplyLag.Observe(time.Since(time.Unix(0, since)).Seconds()) }()
	}
	for _, msg := range f.updates.take() {
		f.dispatch(msg)
	}
	if f.rt.HostRoutesChanged() {
		f.dispatch(routetable.HostRoutesUpdate{Routes: f.rt.HostRoutes()})
	}
	var errs []error
	for _, m := range f.managers {
		if err := m.CompleteDeferredWork(ctx, resync); err != nil {
			errs = append(errs, err)
		}
	}
	// Until felix is in sync the writers add and replace but take nothing away (deletions are
	// held, see Config.WaitForInSync); nor is a route removed (routetable.SetHoldDeletes).
	if err := f.applyWriters(ctx, resync, start); err != nil {
		errs = append(errs, fmt.Errorf("iptables and ipsets: %w", err))
	}
	res, err := f.rt.Apply()
	f.metrics.NetlinkErrors.Add(float64(res.NetlinkErrors))
	if !f.inSync {
		return errors.Join(append(errs, err)...)
	}
	for _, k := range calc.Kinds {
		f.metrics.RoutesProgrammed.WithLabelValues(k.String()).Set(float64(res.Programmed[k]))
	}
	f.metrics.RouteFailures.Set(float64(len(res.Failed)))
	if err != nil {
		for _, e := range res.Failed {
			f.log.Warn("route not programmed", "route", e.Route, "error", e.Err)
		}
		errs = append(errs, err)
	}
	elapsed := time.Since(start)
	f.metrics.ApplyDuration.Observe(elapsed.Seconds())
	if resync {
		f.metrics.ResyncDuration.Observe(elapsed.Seconds())
	}
	f.health.SetReady()
	if len(errs) == 0 {
		f.metrics.LastApply.Set(float64(time.Now().UnixNano()) / 1e9)
	}
	return errors.Join(errs...)
}

// Run is the event loop: netlink subscriptions, messages, timed work (grace periods, retries)
// and the periodic resync. It returns when ctx ends.
func (f *Felix) Run(ctx context.Context) error {
	defer func() {
		f.dpMu.Lock()
		f.flows.stop()
		f.dpMu.Unlock()
	}()
	for {
		err := f.runSubscribed(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, errSubscriptionBroken) {
			return err
		}
		f.log.Warn("netlink subscription broke (events lost): resubscribing and resyncing", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var errSubscriptionBroken = errors.New("netlink subscription broken")

func (f *Felix) runSubscribed(ctx context.Context) error {
	done := make(chan struct{})
	defer close(done)
	// Bursts queue in the subscription's socket buffer, which costs the kernel's memory, not
	// ours: a large channel would keep its memory resident once a burst had filled it. An
	// overflow of both is a broken subscription: resubscribe and resync.
	routes := make(chan netlink.RouteUpdate, 1<<10)
	links := make(chan netlink.LinkUpdate, 1<<10)
	neighs := make(chan netlink.NeighUpdate, 1<<10)
	subErr := make(chan error, 1)
	onErr := func(err error) {
		select {
		case subErr <- err:
		default:
		}
	}
	if err := f.h.Subscribe(done, routes, links, onErr); err != nil {
		return err
	}
	// The VXLAN devices' neighbour and FDB entries: someone removing one is repaired at once.
	if err := f.h.SubscribeNeigh(done, neighs, onErr); err != nil {
		return err
	}
	// Whatever happened before the subscription is only visible by reading the kernel.
	f.QueueResync()

	ticker := time.NewTicker(f.cfg.ResyncInterval)
	defer ticker.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		f.health.Beat(time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-f.kick:
		case <-ticker.C:
			f.dpMu.Lock()
			f.rt.QueueResync()
			f.dpMu.Unlock()
		case <-timer.C:
		case err := <-subErr:
			return fmt.Errorf("%w: %v", errSubscriptionBroken, err)
		case u, ok := <-routes:
			if !ok {
				return errSubscriptionBroken
			}
			f.dpMu.Lock()
			f.onRoute(u)
			f.dpMu.Unlock()
		case u, ok := <-links:
			if !ok {
				return errSubscriptionBroken
			}
			f.dpMu.Lock()
			f.onLink(u)
			f.dpMu.Unlock()
		case u, ok := <-neighs:
			if !ok {
				return errSubscriptionBroken
			}
			f.dpMu.Lock()
			write := f.vxlan.OnNeighUpdate(u)
			f.dpMu.Unlock()
			if !write {
				// Neighbours come and go on every interface; only a change to tabby's VXLAN
				// entries is worth a pass.
				continue
			}
		}
		if err := f.drain(routes, links); err != nil {
			return err
		}
		if err := f.apply(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("dataplane apply incomplete", "error", err)
		}
		f.dpMu.Lock()
		next := f.rt.NextDeadline()
		for _, at := range []time.Time{f.writeRetryAt, f.vxlan.NextDeadline()} {
			if !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		f.dpMu.Unlock()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
	}
}

// drain takes every event already queued, so one pass covers a burst.
func (f *Felix) drain(routes <-chan netlink.RouteUpdate, links <-chan netlink.LinkUpdate) error {
	f.dpMu.Lock()
	defer f.dpMu.Unlock()
	for {
		select {
		case u, ok := <-routes:
			if !ok {
				return errSubscriptionBroken
			}
			f.onRoute(u)
		case u, ok := <-links:
			if !ok {
				return errSubscriptionBroken
			}
			f.onLink(u)
		default:
			return nil
		}
	}
}
