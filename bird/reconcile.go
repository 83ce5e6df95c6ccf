package bird

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// reconcile brings the speaker in line with the inputs. Only Run calls it. The order after a
// start matters: policy, then our paths, then peers — GoBGP sends End-of-RIB as soon as a
// session is up, so a path added after its peer would make a graceful-restart helper withdraw
// and re-add our stale routes; see bird/doc.go. Withdrawals of our paths go first: taking a
// route away is right under any policy, and the policy update would only delay it at every
// peer.
func (b *Bird) reconcile(ctx context.Context) error {
	b.reconciles.Add(1)
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	cached, gen := b.computed, b.peerInputs
	if b.computedAt != gen {
		cached = nil
	}
	var in peers.Input
	if cached == nil {
		in = peers.Input{LocalNode: b.cfg.NodeName, Config: b.bgpConf, Peers: b.bgpPeer, Secrets: b.secrets}
		for _, n := range b.nodes {
			in.Nodes = append(in.Nodes, peers.Node{Name: n.Name, Labels: n.Labels, Address: n.Address, Address6: n.Address6, ASN: n.ASN, RRClusterID: n.RRClusterID})
		}
	}
	pools := slices.Clone(b.pools)
	local := slices.Clone(b.local)
	routable := b.routable // replaced, never modified, by SetRoutable
	services := serviceCIDRs(b.bgpConf)
	b.mu.Unlock()

	if cached == nil {
		res, err := peers.Compute(in)
		if err != nil {
			return fmt.Errorf("compute BGP peers: %w", err)
		}
		cached = &res
		b.mu.Lock()
		b.computed, b.computedAt = cached, gen
		b.mu.Unlock()
	}
	res := *cached
	if problems := strings.Join(res.Problems, "\n"); problems != b.lastProblems {
		for _, p := range res.Problems {
			b.log.Warn("BGP peer configuration problem", "problem", p)
		}
		b.lastProblems = problems
		b.mu.Lock()
		b.problems = slices.Clone(res.Problems)
		b.mu.Unlock()
	}
	want := res.Speaker
	if b.cfg.ListenAddress != "" {
		want.Address = netip.PrefixFrom(netip.MustParseAddr(b.cfg.ListenAddress), 32)
	}

	if err := b.ensureSpeaker(ctx, want); err != nil {
		return err
	}
	b.mu.Lock()
	spk := b.spk
	desired := map[netip.Addr]peers.Peer{}
	for _, p := range res.Peers {
		desired[p.Address] = p
	}
	b.desired = desired
	b.mu.Unlock()

	var errs []error
	// Paths: ours and the service CIDRs, next hop = this node's address of the prefix's family.
	// An IPv6 prefix of a node without an IPv6 address has no next hop to carry: not advertised.
	nextHop := func(p netip.Prefix) netip.Addr {
		if p.Addr().Is6() {
			return want.Address6.Addr()
		}
		return want.RouterID
	}
	wantPaths := map[netip.Prefix]bool{}
	for _, p := range slices.Concat(local, services) {
		if nextHop(p).IsValid() {
			wantPaths[p.Masked()] = true
		}
	}
	for p := range b.paths {
		if !wantPaths[p] {
			if err := spk.DeletePath(ctx, p, nextHop(p)); err != nil {
				errs = append(errs, err)
				continue
			}
			b.mu.Lock()
			delete(b.paths, p)
			b.mu.Unlock()
		}
	}
	// Policy: pools, our prefixes, and which peers are external routers.
	pol := speaker.Policy{Pools: sortedPrefixes(pools), Local: sortedPrefixes(local), Services: services, Address6: want.Address6.Addr()}
	for _, p := range res.Peers {
		if p.Node == "" {
			pol.External = append(pol.External, p.Address)
			if !p.IBGP() && !p.RouteServer {
				pol.FirstAS = append(pol.FirstAS, speaker.PeerAS{Address: p.Address, ASN: p.ASN})
			}
		}
		switch {
		case p.IBGP():
		case p.KeepOriginalNextHop:
			pol.KeepNextHop = append(pol.KeepNextHop, p.Address)
		default:
			pol.NextHopSelf = append(pol.NextHopSelf, p.Address)
		}
		if p.Sibling {
			pol.Siblings = append(pol.Siblings, p.Address)
		}
	}
	// The explained prefixes filter only what external routers send. Without one, a block
	// claimed or released elsewhere changes nothing in the speaker; with the first one the
	// policy changes and is set whole, explained prefixes included.
	if len(pol.External) > 0 {
		pol.Explained = routable
	}
	if b.policy == nil || !b.policy.Equal(pol) {
		if err := spk.SetPolicy(ctx, pol); err != nil {
			return errors.Join(append(errs, err)...) // without the policy nothing else is safe to do
		}
		b.policy = &pol
	}
	// Whether routable matters to the policy now set. Set after it, checked against what this
	// pass used: a change that SetRoutable left alone meanwhile (it still counted as unused)
	// wakes the next pass.
	b.mu.Lock()
	b.routableUnused = len(pol.External) == 0
	stale := !b.routableUnused && !slices.Equal(b.routable, routable)
	b.mu.Unlock()
	if stale {
		b.trigger()
	}

	for p := range wantPaths {
		if !b.paths[p] {
			if err := spk.AddPath(ctx, p, nextHop(p)); err != nil {
				errs = append(errs, err)
				continue
			}
			b.mu.Lock()
			b.paths[p] = true
			b.mu.Unlock()
		}
	}

	// Peers: delete what is gone or changed, flush lost nodes, add what is missing. A changed
	// BGPPeer/BGPConfiguration/Secret thus resets exactly the sessions whose Peer changed.
	now := time.Now()
	for addr, cur := range b.configured {
		w, ok := desired[addr]
		if ok && w == cur {
			continue
		}
		if err := spk.DeletePeer(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		b.mu.Lock()
		delete(b.configured, addr)
		if !ok {
			delete(b.sessions, addr)
		}
		b.mu.Unlock()
		if ok {
			b.log.Info("BGP peer changed: resetting its session", "peer", addr, "source", w.Source)
		} else {
			b.log.Info("BGP peer removed", "peer", addr, "source", cur.Source)
		}
	}
	for addr, p := range b.configured {
		if !b.takeFlush(addr, p, now) {
			continue
		}
		// Delete drops every route learned from the peer at once (GoBGP would keep them stale
		// for the whole restart time); the re-added peer reconnects when the node is back.
		b.log.Warn("BGP session with a tabby node lost without a graceful restart notice: dropping its routes",
			"peer", addr, "node", p.Node)
		if err := spk.DeletePeer(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		b.mu.Lock()
		delete(b.configured, addr)
		b.mu.Unlock()
	}
	for addr := range b.configured {
		if !b.takeRedial(addr) {
			continue
		}
		if err := spk.DeletePeer(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		b.mu.Lock()
		delete(b.configured, addr)
		b.mu.Unlock()
	}
	for addr, p := range desired {
		if _, ok := b.configured[addr]; ok || p.Err != "" {
			continue
		}
		// Before AddPeer: its established event may come before AddPeer returns.
		b.mu.Lock()
		b.sessionLocked(addr).upSinceAdded = false
		b.mu.Unlock()
		if err := spk.AddPeer(ctx, p); err != nil {
			errs = append(errs, err)
			continue
		}
		b.mu.Lock()
		b.configured[addr] = p
		b.mu.Unlock()
		b.log.Info("BGP peer added", "peer", addr, "port", p.Port, "asn", p.ASN, "type", p.Type, "source", p.Source)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	b.mu.Lock()
	b.lastErr = ""
	b.mu.Unlock()
	return nil
}

// takeFlush tells whether the routes of a lost tabby node must go now, and clears the request.
func (b *Bird) takeFlush(addr netip.Addr, p peers.Peer, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[addr]
	if s == nil {
		return false
	}
	if s.inGR && s.state != "established" && !b.restartingLocked(addr, p, now) {
		s.inGR = false
		s.flush = true
		s.info = "graceful restart window ended before the node came back: routes dropped"
	}
	f := s.flush
	s.flush = false
	return f
}

// takeRedial tells whether a never-established tabby node peer must be re-added now (see
// onState), and clears the request.
func (b *Bird) takeRedial(addr netip.Addr) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[addr]
	if s == nil || !s.redial {
		return false
	}
	s.redial = false
	if s.upSinceAdded || s.state == "established" {
		return false
	}
	s.redials++
	b.log.Debug("tabby node refused our connection before the session opened: re-adding the peer to redial without GoBGP's 5 s idle",
		"peer", addr, "attempt", s.redials)
	return true
}

// ensureSpeaker starts the speaker, or restarts it when its identity (router ID, AS, port)
// changed: GoBGP cannot change those while running.
func (b *Bird) ensureSpeaker(ctx context.Context, want peers.Speaker) error {
	b.mu.Lock()
	old, cur := b.spk, b.speakerCfg
	b.mu.Unlock()
	if old != nil && cur == want {
		return nil
	}
	if old != nil {
		b.log.Info("BGP identity changed: restarting the speaker", "router_id", want.RouterID, "asn", want.ASN, "port", want.ListenPort)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := old.Stop(sctx, false)
		cancel()
		b.mu.Lock()
		b.spkCancel()
		b.spk, b.policy = nil, nil
		b.configured = map[netip.Addr]peers.Peer{}
		b.paths = map[netip.Prefix]bool{}
		b.sessions = map[netip.Addr]*session{}
		b.mu.Unlock()
		b.withdrawAllTold()
		if err != nil {
			return fmt.Errorf("stop speaker: %w", err)
		}
	}
	spk := b.starting // a speaker whose Start failed is retried, not replaced
	if spk == nil {
		var err error
		if spk, err = b.cfg.NewSpeaker(b.cfg.Logger, b.cfg.GoBGPAPI); err != nil {
			return err
		}
		b.starting = spk
	}
	if err := spk.Start(ctx, want); err != nil {
		return err
	}
	b.starting = nil
	wctx, cancel := context.WithCancel(context.Background())
	if err := spk.Watch(wctx, b.onEvent); err != nil {
		cancel()
		_ = spk.Stop(ctx, false)
		return fmt.Errorf("watch BGP events: %w", err)
	}
	b.mu.Lock()
	b.spk, b.spkCancel, b.speakerCfg, b.started = spk, cancel, want, time.Now()
	b.mu.Unlock()
	b.log.Info("BGP speaker started", "router_id", want.RouterID, "asn", want.ASN, "port", want.ListenPort, "cluster_id", want.ClusterID)
	return nil
}

func sortedPrefixes(in []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(in))
	for _, p := range in {
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

// serviceCIDRs are the BGPConfiguration's serviceClusterIPs and serviceExternalIPs, sorted; an
// invalid one (the syncer passes only validated configurations) is skipped.
func serviceCIDRs(c *v1.BGPConfiguration) []netip.Prefix {
	if c == nil {
		return nil
	}
	var out []netip.Prefix
	for _, list := range [][]v1.ServiceCIDR{c.Spec.ServiceClusterIPs, c.Spec.ServiceExternalIPs} {
		for _, s := range list {
			if p, err := validation.ParseIPv4CIDR(s.CIDR); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return sortedPrefixes(out)
}
