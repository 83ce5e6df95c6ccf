package bird

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// CompleteDeferredWork brings the speaker in line with the messages recorded since the last
// pass, running only the reconcilers of the concerns they marked. Run calls it after every
// change; a caller that drives bird without Run may call it instead. What fails stays marked
// and is retried by the next pass.
//
// The order matters. Sessions are computed first: the speaker's identity, the policy and the
// neighbors follow from them. Then the speaker itself, started or restarted; our withdrawn
// paths, then the policy, then our new paths, then the peers. GoBGP sends End-of-RIB as soon as
// a session is up, so a path added after its peer would make a graceful-restart helper withdraw
// and re-add our stale routes (docs/architecture.md, "Restart versus death"). A withdrawal goes
// before the policy: taking a route away is right under any policy, and the policy update would
// only delay it at every peer; a new path goes after the policy that accepts it.
func (b *Bird) CompleteDeferredWork(ctx context.Context) error {
	b.passMu.Lock()
	defer b.passMu.Unlock()
	b.mu.Lock()
	dirty := b.dirty
	b.dirty = 0
	stopped := b.stopped
	b.mu.Unlock()
	if stopped || dirty == 0 {
		return nil
	}
	b.reconciles.Add(1)
	left, err := b.pass(ctx, dirty)
	b.mu.Lock()
	b.dirty |= left
	if err == nil {
		b.lastErr = ""
	}
	b.mu.Unlock()
	return err
}

// pass runs the reconcilers of dirty in order and returns what is left to do.
func (b *Bird) pass(ctx context.Context, dirty dirtySet) (dirtySet, error) {
	if dirty&dirtyRoutes != 0 {
		b.retell()
		dirty &^= dirtyRoutes
	}
	if dirty&dirtySessions != 0 {
		b.mu.Lock()
		_, known := b.in.findNode(b.in.self)
		b.mu.Unlock()
		if !known && !b.computedOK {
			// The first passes run before the datastore has named this node: nothing is wrong
			// yet, and its NodeUpdate marks the sessions again.
			return dirty, nil
		}
		changed, err := b.computeSessions()
		if err != nil {
			return dirty, err
		}
		dirty = dirty&^dirtySessions | changed
	}
	if !b.computedOK { // nothing to bring in line before the sessions were computed once
		return dirty | dirtySessions, nil
	}
	if dirty&dirtySpeaker != 0 || b.speakerRec.running == nil {
		want := b.computed.Speaker
		want.Listen = b.listen
		restarted, err := b.reconcileSpeaker(ctx, want)
		if restarted {
			dirty |= dirtyPaths | dirtyPolicy | dirtyNeighbors
		}
		if err != nil {
			return dirty | dirtySpeaker, err
		}
		if b.speakerRec.running == nil { // stopped meanwhile
			return 0, nil
		}
		dirty &^= dirtySpeaker
	}
	spk := b.speakerRec.running

	var errs []error
	var left dirtySet
	var paths map[netip.Prefix]netip.Addr
	if dirty&dirtyPaths != 0 {
		b.mu.Lock()
		own, services := b.in.own.list(), slices.Concat(b.in.aggregates, b.in.serviceHosts.list())
		b.mu.Unlock()
		paths = desiredPaths(own, services, nextHops(b.computed.Speaker))
		if err := b.paths.withdraw(ctx, spk, paths); err != nil {
			errs = append(errs, err)
			left |= dirtyPaths
		}
	}
	if dirty&dirtyPolicy != 0 {
		if err := b.reconcilePolicy(ctx); err != nil {
			// Without the policy nothing else is safe to do.
			return left | dirty&(dirtyPolicy|dirtyPaths|dirtyNeighbors), errors.Join(append(errs, err)...)
		}
	}
	if dirty&dirtyPaths != 0 {
		if err := b.paths.advertise(ctx, spk, paths); err != nil {
			errs = append(errs, err)
			left |= dirtyPaths
		}
		b.mu.Lock()
		b.advertisedN = len(b.paths.advertised)
		b.mu.Unlock()
	}
	if dirty&dirtyNeighbors != 0 && b.sessionsMayOpen() {
		b.mu.Lock()
		desired := b.desired // replaced, never modified
		b.mu.Unlock()
		if err := b.neighbors.reconcile(ctx, spk, desired, b, time.Now()); err != nil {
			errs = append(errs, err)
			left |= dirtyNeighbors
		}
		b.mu.Lock()
		b.configuredN = len(b.neighbors.configured)
		b.mu.Unlock()
	}
	return left, errors.Join(errs...)
}

// computeSessions computes the sessions from the nodes, the BGPConfiguration, the BGPPeers and
// the Secrets, and returns what of the speaker the result changed.
func (b *Bird) computeSessions() (dirtySet, error) {
	b.mu.Lock()
	in := b.in.sessionsInput()
	b.mu.Unlock()
	b.computes++
	res, err := peers.Compute(in)
	if err != nil {
		return 0, fmt.Errorf("compute BGP peers: %w", err)
	}
	var changed dirtySet
	if !b.computedOK || res.Speaker != b.computed.Speaker {
		changed |= dirtySpeaker | dirtyPaths | dirtyPolicy
	}
	if !b.computedOK || !slices.Equal(res.Peers, b.computed.Peers) {
		changed |= dirtyNeighbors | dirtyPolicy
	}
	// A session that cannot open (a missing Secret or BGPFilter) says why once, in the log as in
	// the status.
	was := map[netip.Addr]string{}
	for _, p := range b.computed.Peers {
		was[p.Address] = p.Err
	}
	for _, p := range res.Peers {
		if p.Err != "" && was[p.Address] != p.Err {
			b.log.Warn("BGP session not opened", "peer", p.Address, "reason", p.Err)
		}
	}
	b.computed, b.computedOK = res, true
	b.sessionsPolicy = sessionsPolicy(res.Peers)
	if problems := strings.Join(res.Problems, "\n"); problems != b.lastProblems {
		for _, p := range res.Problems {
			b.log.Warn("BGP peer configuration problem", "problem", p)
		}
		b.lastProblems = problems
	}
	desired := make(map[netip.Addr]peers.Peer, len(res.Peers))
	for _, p := range res.Peers {
		desired[p.Address] = p
	}
	b.mu.Lock()
	b.desired = desired
	b.problems = slices.Clone(res.Problems)
	b.mu.Unlock()
	return changed, nil
}

// reconcileSpeaker starts or restarts the speaker. A restart (stopped) takes the speaker's
// paths, policy and sessions with it, and the routes learned from them.
func (b *Bird) reconcileSpeaker(ctx context.Context, want peers.Speaker) (stopped bool, err error) {
	r := &b.speakerRec
	was := r.running
	stopped, err = r.reconcile(ctx, want)
	if stopped {
		b.paths.reset()
		b.policy.reset()
		b.neighbors.reset()
		b.mu.Lock()
		b.spk, b.spkCancel = nil, nil
		b.sessions = map[netip.Addr]*session{}
		b.advertisedN, b.configuredN = 0, 0
		b.mu.Unlock()
		b.withdrawAllTold()
	}
	if err != nil || r.running == was {
		return stopped, err
	}
	b.mu.Lock()
	if b.stopped {
		// Stop ran meanwhile and found no speaker to stop.
		b.mu.Unlock()
		return stopped, r.stop(ctx)
	}
	b.spk, b.spkCancel, b.speakerCfg, b.started = r.running, r.cancel, r.cfg, r.started
	b.mu.Unlock()
	return stopped, nil
}

// reconcilePolicy sets the speaker's filter. The explained prefixes are in it only while an
// external router is: the same lock hold decides whether a block claimed or released elsewhere
// must wake the agent from now on.
func (b *Bird) reconcilePolicy(ctx context.Context) error {
	b.mu.Lock()
	pol := desiredPolicy(b.in.poolCIDRs, b.in.own.list(), b.in.services, b.sessionsPolicy, b.computed.Speaker.Address.Get(ipfamily.IPv6).Addr())
	pol.Filters, pol.Communities = filterChains(b.computed.Peers, b.in.filters), b.in.advertisements
	b.explainedUnused = len(pol.External) == 0
	if !b.explainedUnused {
		pol.Explained = b.in.explained.list()
	}
	b.mu.Unlock()
	return b.policy.reconcile(ctx, b.speakerRec.running, pol)
}

// sessionsMayOpen: with Config.WaitForInSync, no session opens before the whole datastore has
// been sent (model.InSync); InSync marks the neighbors again.
func (b *Bird) sessionsMayOpen() bool {
	if !b.cfg.WaitForInSync {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.in.inSync
}
