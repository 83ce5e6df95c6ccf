package benchutil

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RouteWatch follows the main table of several namespaces through rtnetlink route
// notifications (no polling): for every prefix inside the pool and of the watched protocol it
// keeps the gateway each namespace holds and when that route arrived.
type RouteWatch struct {
	proto int
	pool  netip.Prefix

	mu    sync.Mutex
	state map[string]map[netip.Prefix]SeenRoute // namespace → prefix → route
	// left: when each namespace last lost the prefix (until it holds it again).
	left map[string]map[netip.Prefix]time.Time
	wake chan struct{}
	errs []error

	done chan struct{}
}

// SeenRoute is a route as a namespace holds it: its gateway (the first of a multipath
// route's), every gateway of a multipath route (ECMP), and when it arrived as such.
type SeenRoute struct {
	GW   netip.Addr
	Hops []netip.Addr // sorted; one entry for a route over a single gateway
	At   time.Time
	// First is when the prefix arrived, whatever its gateways then.
	First time.Time
}

// WatchRoutes subscribes to route notifications in every named namespace. Subscriptions start
// before anything is measured, so no notification is missed. No ListExisting: netlink v1.3.1
// sends its dump request to the socket's own multicast groups, so every other listener in the
// namespace (felix) receives a message from a user-space sender and has to resync; and there is
// nothing to list, as the benchmark's prefixes do not exist before it starts.
func WatchRoutes(namespaces map[string]string, proto int, pool netip.Prefix) (*RouteWatch, error) {
	w := &RouteWatch{proto: proto, pool: pool, state: map[string]map[netip.Prefix]SeenRoute{}, left: map[string]map[netip.Prefix]time.Time{},
		wake: make(chan struct{}), done: make(chan struct{})}
	for name, path := range namespaces {
		h, err := netns.GetFromPath(path)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("open netns %s: %w", path, err)
		}
		ch := make(chan netlink.RouteUpdate, 8192)
		err = netlink.RouteSubscribeWithOptions(ch, w.done, netlink.RouteSubscribeOptions{
			Namespace: &h, ReceiveBufferSize: 4 << 20,
			ErrorCallback: func(err error) { w.fail(fmt.Errorf("route subscription in %s: %w", name, err)) },
		})
		h.Close() // the subscription holds its own socket in the namespace
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("subscribe to routes in %s: %w", name, err)
		}
		w.state[name] = map[netip.Prefix]SeenRoute{}
		w.left[name] = map[netip.Prefix]time.Time{}
		go w.follow(name, ch)
	}
	return w, nil
}

// Close ends the subscriptions.
func (w *RouteWatch) Close() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
}

func (w *RouteWatch) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.signal()
	w.mu.Unlock()
}

// signal wakes every waiter; mu must be held.
func (w *RouteWatch) signal() {
	close(w.wake)
	w.wake = make(chan struct{})
}

func (w *RouteWatch) follow(name string, ch <-chan netlink.RouteUpdate) {
	for u := range ch {
		now := time.Now()
		if u.Table != unix.RT_TABLE_MAIN || int(u.Protocol) != w.proto || u.Dst == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(u.Dst.IP.To4())
		if !ok {
			continue
		}
		ones, _ := u.Dst.Mask.Size()
		p := netip.PrefixFrom(a, ones)
		if !w.pool.Overlaps(p) {
			continue
		}
		var gw netip.Addr
		if u.Gw != nil {
			gw, _ = netip.AddrFromSlice(u.Gw.To4())
		}
		hops := []netip.Addr{gw}
		if len(u.MultiPath) > 0 {
			hops = hops[:0]
			for _, nh := range u.MultiPath {
				if a, ok := netip.AddrFromSlice(nh.Gw.To4()); ok {
					hops = append(hops, a)
				}
			}
			slices.SortFunc(hops, netip.Addr.Compare)
			if len(hops) > 0 {
				gw = hops[0]
			}
		}
		w.mu.Lock()
		switch u.Type {
		case unix.RTM_NEWROUTE:
			// A replace with the same gateways keeps the first arrival time.
			if old, ok := w.state[name][p]; !ok {
				w.state[name][p] = SeenRoute{GW: gw, Hops: hops, At: now, First: now}
			} else if !slices.Equal(old.Hops, hops) {
				w.state[name][p] = SeenRoute{GW: gw, Hops: hops, At: now, First: old.First}
			}
			delete(w.left[name], p)
		case unix.RTM_DELROUTE:
			if _, ok := w.state[name][p]; ok {
				w.left[name][p] = now
			}
			delete(w.state[name], p)
		}
		w.signal()
		w.mu.Unlock()
	}
}

// WaitFor blocks until cond holds over the current state (evaluated after every notification)
// or the timeout passes.
func (w *RouteWatch) WaitFor(ctx context.Context, timeout time.Duration, what string, cond func(state map[string]map[netip.Prefix]SeenRoute) error) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		w.mu.Lock()
		if len(w.errs) > 0 {
			err := w.errs[0]
			w.mu.Unlock()
			return err
		}
		last := cond(w.state)
		ch := w.wake
		w.mu.Unlock()
		if last == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("%s: interrupted: %w", what, parent.Err())
			}
			return fmt.Errorf("%s: not after %v: %w", what, timeout, last)
		}
	}
}

// Arrived waits until every namespace in others holds p via gw, and returns when each got it.
func (w *RouteWatch) Arrived(ctx context.Context, timeout time.Duration, p netip.Prefix, gw netip.Addr, others []string) (map[string]time.Time, error) {
	var got map[string]time.Time
	err := w.WaitFor(ctx, timeout, fmt.Sprintf("route %s via %s in %d namespaces", p, gw, len(others)), func(st map[string]map[netip.Prefix]SeenRoute) error {
		got = make(map[string]time.Time, len(others))
		var missing []string
		for _, n := range others {
			r, ok := st[n][p]
			if !ok || r.GW != gw {
				missing = append(missing, n)
				continue
			}
			got[n] = r.At
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing in %v", missing)
		}
		return nil
	})
	return got, err
}

// Withdrawn waits until no namespace in others holds p, and returns when each lost it (a
// namespace that never held p since the watch began is left out).
func (w *RouteWatch) Withdrawn(ctx context.Context, timeout time.Duration, p netip.Prefix, others []string) (map[string]time.Time, error) {
	var got map[string]time.Time
	err := w.WaitFor(ctx, timeout, fmt.Sprintf("withdrawal of %s in %d namespaces", p, len(others)), func(st map[string]map[netip.Prefix]SeenRoute) error {
		got = make(map[string]time.Time, len(others))
		var still []string
		for _, n := range others {
			if r, ok := st[n][p]; ok {
				still = append(still, fmt.Sprintf("%s (via %s)", n, r.GW))
				continue
			}
			if at, ok := w.left[n][p]; ok {
				got[n] = at
			}
		}
		if len(still) > 0 {
			return fmt.Errorf("still in %v", still)
		}
		return nil
	})
	return got, err
}

// Gone waits until no namespace holds any of the prefixes.
func (w *RouteWatch) Gone(ctx context.Context, timeout time.Duration, ps []netip.Prefix) error {
	return w.WaitFor(ctx, timeout, fmt.Sprintf("withdrawal of %d prefixes", len(ps)), func(st map[string]map[netip.Prefix]SeenRoute) error {
		left := 0
		var where []string
		for _, n := range slices.Sorted(maps.Keys(st)) {
			var here []string
			for _, p := range ps {
				if r, ok := st[n][p]; ok {
					left++
					here = append(here, fmt.Sprintf("%s via %s", p, r.GW))
				}
			}
			if len(here) > 0 {
				where = append(where, fmt.Sprintf("%s: %d (%s)", n, len(here), here[0]))
			}
		}
		if left > 0 {
			if len(where) > 3 {
				where = append(where[:3], fmt.Sprintf("… %d nodes in all", len(where)))
			}
			return fmt.Errorf("%d routes left: %s", left, strings.Join(where, "; "))
		}
		return nil
	})
}
