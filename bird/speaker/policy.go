package speaker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	api "github.com/osrg/gobgp/v4/api"
	"google.golang.org/protobuf/proto"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Names of tabby's GoBGP policy objects (visible with `gobgp policy` on the local API).
const (
	setPools       = "tabby-pools"
	setLocal       = "tabby-local"
	setServices    = "tabby-services"
	setExternal    = "tabby-external"
	setLearned     = "tabby-learned-external"
	setKeepNH      = "tabby-keep-next-hop"
	setNextHopSelf = "tabby-next-hop-self"
	setSiblings    = "tabby-sibling-reflectors"
	setFromSib     = "tabby-learned-sibling"
	setExplain     = "tabby-explained"
	// setExternalIBGP: the external routers of the cluster's AS, the only peers a LOCAL_PREF
	// means something to.
	setExternalIBGP = "tabby-external-ibgp"
	// ExternalLocalPref is the LOCAL_PREF of every route learned from an external router: below
	// the default 100 of the cluster's own, so a node's own announcement of its block wins over
	// any external path for it on every node and reflector, before AS-path length is looked at
	// (a route server's empty AS path would otherwise tie, and eBGP beats iBGP).
	ExternalLocalPref = 50
	// LearnedExternalCommunity marks routes learned from a router that is not a tabby node, so
	// that they are never passed on to another peer. AS 0 is reserved: no operator uses it.
	LearnedExternalCommunity = "0:201"
	// LearnedSiblingCommunity marks, inside this speaker only, routes learned from another
	// route reflector of our cluster: never sent to a sibling, stripped from every export.
	LearnedSiblingCommunity = "0:202"
)

// placeholder keeps a set non-empty: GoBGP treats an empty neighbor set as matching everyone.
var placeholder = netip.MustParsePrefix("255.255.255.255/32")

// placeholder6 is the same for an IPv6 prefix set.
var placeholder6 = netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")

// setName6 names the IPv6 half of a prefix set: GoBGP's prefix sets hold one family each, so
// every prefix set is two, and every statement that matches one is two (bothFamilies).
func setName6(name string) string { return name + "-v6" }

// prefixSets matches the prefixes of list and everything inside them, as an IPv4 set named
// name and an IPv6 one named setName6(name).
func prefixSets(name string, list []netip.Prefix) []*api.DefinedSet {
	return familySets(name, list, withInside)
}

// exactPrefixSets matches each prefix of list exactly (no more-specific ones).
func exactPrefixSets(name string, list []netip.Prefix) []*api.DefinedSet {
	return familySets(name, list, exactly)
}

func withInside(p netip.Prefix) uint32 { return uint32(p.Addr().BitLen()) }
func exactly(p netip.Prefix) uint32    { return uint32(p.Bits()) }

// familyList is one family's half of a prefix set: its name and its prefixes, never none.
type familyList struct {
	name     string
	prefixes []netip.Prefix
}

func familyLists(name string, list []netip.Prefix) [2]familyList {
	var out [2]familyList
	for i, f := range []struct {
		fam         ipfamily.Family
		name        string
		placeholder netip.Prefix
	}{{ipfamily.IPv4, name, placeholder}, {ipfamily.IPv6, setName6(name), placeholder6}} {
		ps := ipfamily.Split(list, f.fam)
		if len(ps) == 0 {
			ps = []netip.Prefix{f.placeholder}
		}
		out[i] = familyList{name: f.name, prefixes: ps}
	}
	return out
}

func familySets(name string, list []netip.Prefix, maxLen func(netip.Prefix) uint32) []*api.DefinedSet {
	var out []*api.DefinedSet
	for _, f := range familyLists(name, list) {
		out = append(out, apiPrefixSet(f.name, f.prefixes, maxLen))
	}
	return out
}

func apiPrefixSet(name string, ps []netip.Prefix, maxLen func(netip.Prefix) uint32) *api.DefinedSet {
	ds := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: name, Prefixes: make([]*api.Prefix, 0, len(ps))}
	for _, p := range ps {
		ds.Prefixes = append(ds.Prefixes, &api.Prefix{IpPrefix: p.Masked().String(), MaskLengthMin: uint32(p.Bits()), MaskLengthMax: maxLen(p)})
	}
	return ds
}

// bothFamilies follows every statement that matches a prefix set with its copy for the set's
// IPv6 half; a prefix set only ever matches routes of its own family, so the two never meet.
func bothFamilies(stmts []*api.Statement) []*api.Statement {
	out := make([]*api.Statement, 0, 2*len(stmts))
	for _, st := range stmts {
		out = append(out, st)
		if st.GetConditions().GetPrefixSet() == nil {
			continue
		}
		v6 := proto.Clone(st).(*api.Statement)
		v6.Name = setName6(st.Name)
		v6.Conditions.PrefixSet.Name = setName6(st.Conditions.PrefixSet.Name)
		out = append(out, v6)
	}
	return out
}

// firstASChecks returns, per AS, the sets and the statement that reject a route from an eBGP
// router of that AS whose AS path does not begin with it (RFC 4271 section 6.3).
func firstASChecks(peers []PeerAS) ([]*api.DefinedSet, []*api.Statement) {
	byAS := map[uint32][]netip.Addr{}
	var order []uint32
	for _, p := range peers {
		if _, ok := byAS[p.ASN]; !ok {
			order = append(order, p.ASN)
		}
		byAS[p.ASN] = append(byAS[p.ASN], p.Address)
	}
	slices.Sort(order)
	var sets []*api.DefinedSet
	var stmts []*api.Statement
	for _, as := range order {
		nb := fmt.Sprintf("tabby-first-as-%d-peers", as)
		path := fmt.Sprintf("tabby-first-as-%d", as)
		ds := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: nb}
		for _, a := range byAS[as] {
			ds.List = append(ds.List, ipfamily.HostPrefix(a).String())
		}
		sets = append(sets, ds, &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_AS_PATH, Name: path, List: []string{fmt.Sprintf("^%d_", as)}})
		stmts = append(stmts, &api.Statement{Name: "tabby-import-first-as-" + strconv.FormatUint(uint64(as), 10),
			Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: nb}, AsPathSet: &api.MatchSet{Type: api.MatchSet_TYPE_INVERT, Name: path}},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}})
	}
	return sets, stmts
}

// SetPolicy implements Speaker. Import: routes inside a pool, except that an external router
// may not announce one of our own prefixes (or anything inside them); what it announces is
// tagged, and so is what a sibling reflector sends (less preferred, never sent to a sibling:
// docs/architecture.md, "Route reflectors"). Export: pool routes, never one learned from an
// external router (no transit between ToRs, no ToR route leaked into the mesh); the service
// ranges, to external routers only, and never imported. Everything else is rejected both ways.
func (g *GoBGP) SetPolicy(ctx context.Context, p Policy) error {
	// Our own and the explained prefixes change with every block claimed or released in the
	// cluster: patch those sets in place rather than replace every set, policy and assignment
	// (which made GoBGP re-evaluate and slowed every block's propagation and withdrawal), and
	// re-run the import of external routers only, the one thing these sets filter.
	if last := g.lastPolicy; last != nil {
		same := *last
		same.Local, same.Explained = p.Local, p.Explained
		if same.Equal(p) {
			return g.patchPrefixSets(ctx, *last, p)
		}
	}
	sets, imp, exp := policyObjects(p)
	// SetPolicies replaces sets and policies but ignores assignments: assign separately.
	if err := g.srv.SetPolicies(ctx, &api.SetPoliciesRequest{DefinedSets: sets, Policies: []*api.Policy{imp, exp}}); err != nil {
		return fmt.Errorf("set import/export policy: %w", err)
	}
	for _, a := range []*api.PolicyAssignment{
		{Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT, Policies: []*api.Policy{{Name: imp.Name}}, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT},
		{Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT, Policies: []*api.Policy{{Name: exp.Name}}, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT},
	} {
		if err := g.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: a}); err != nil {
			return fmt.Errorf("assign %s policy: %w", a.Direction, err)
		}
	}
	// GoBGP keeps every received route before policy: re-run the policy where it changed. Our
	// own prefixes, the explained ones and the first-AS checks change with blocks and borrowed
	// addresses or peers but only filter what external routers send, so they re-run the import
	// from those alone.
	last := g.lastPolicy
	g.lastPolicy = &p
	if last == nil || !slices.Equal(last.Pools, p.Pools) || !slices.Equal(last.KeepNextHop, p.KeepNextHop) ||
		!slices.Equal(last.NextHopSelf, p.NextHopSelf) || last.IPv6NextHop != p.IPv6NextHop || !slices.Equal(last.Siblings, p.Siblings) || !slices.Equal(last.Services, p.Services) ||
		!slices.EqualFunc(last.Filters, p.Filters, FilterChain.Equal) || !slices.EqualFunc(last.Communities, p.Communities, model.PrefixCommunities.Equal) {
		if err := g.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: "all", Soft: true, Direction: api.ResetPeerRequest_DIRECTION_BOTH}); err != nil {
			return fmt.Errorf("re-apply policy: %w", err)
		}
		return nil
	}
	if slices.Equal(last.Local, p.Local) && slices.Equal(last.External, p.External) && slices.Equal(last.Explained, p.Explained) && slices.Equal(last.FirstAS, p.FirstAS) {
		return nil
	}
	return g.reapplyImportFromExternal(ctx, p.External)
}

// policyObjects builds the sets and the import and export policies of p. Each is tabby's
// safety rules first (no rule of a BGPFilter comes before them, so none can undo them), then
// the peers' BGPFilters, then what tabby takes or sends by default.
func policyObjects(p Policy) ([]*api.DefinedSet, *api.Policy, *api.Policy) {
	neighbors := func(name string, list []netip.Addr) *api.DefinedSet {
		ds := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: name, List: []string{placeholder.String()}}
		for _, a := range list {
			ds.List = append(ds.List, ipfamily.HostPrefix(a).String())
		}
		return ds
	}
	sets := slices.Concat(prefixSets(setPools, p.Pools), prefixSets(setLocal, p.Local), prefixSets(setServices, p.Services), exactPrefixSets(setExplain, p.Explained))
	sets = append(sets,
		neighbors(setExternal, p.External),
		neighbors(setKeepNH, p.KeepNextHop),
		neighbors(setNextHopSelf, p.NextHopSelf),
		neighbors(setSiblings, p.Siblings),
		neighbors(setExternalIBGP, p.externalIBGP()),
		&api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_COMMUNITY, Name: setLearned, List: []string{"^" + LearnedExternalCommunity + "$"}},
		&api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_COMMUNITY, Name: setFromSib, List: []string{"^" + LearnedSiblingCommunity + "$"}},
	)
	sets = append(sets, markSets()...)
	asSets, firstAS := firstASChecks(p.FirstAS)
	sets = append(sets, asSets...)
	impSets, impFilters := filterStatements(p.Filters, false)
	expSets, expFilters := filterStatements(p.Filters, true)
	commSets, communities := communityStatements(p.Communities)
	sets = slices.Concat(sets, impSets, expSets, commSets)
	strip := stripInternal()
	match := func(name string) *api.MatchSet { return &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: name} }
	not := func(name string) *api.MatchSet { return &api.MatchSet{Type: api.MatchSet_TYPE_INVERT, Name: name} }
	learned := &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: []string{LearnedExternalCommunity}}
	unmark := &api.CommunityAction{Type: api.CommunityAction_TYPE_REMOVE, Communities: []string{"^" + FilterAcceptedCommunity + "$"}}
	imp := &api.Policy{Name: "tabby-import", Statements: slices.Concat(bothFamilies(slices.Concat([]*api.Statement{
		// Service addresses are every node's own (kube-proxy): originated here (the global
		// import policy sees local paths too), never learned, even inside a pool.
		{Name: "tabby-import-own-services", Conditions: &api.Conditions{PrefixSet: match(setServices), RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT}},
		{Name: "tabby-import-no-services", Conditions: &api.Conditions{PrefixSet: match(setServices)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}},
		{Name: "tabby-import-own-from-external", Conditions: &api.Conditions{NeighborSet: match(setExternal), PrefixSet: match(setLocal)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}},
	}, firstAS, []*api.Statement{
		// tabby's marks mean what tabby decided: an external router may not send them.
		{Name: "tabby-import-external-unmarked", Conditions: &api.Conditions{NeighborSet: match(setExternal)},
			Actions: &api.Actions{Community: &api.CommunityAction{Type: api.CommunityAction_TYPE_REMOVE, Communities: internalMarks}}},
		// Inside a pool an external router may only announce what IPAM explains (a block, a
		// borrowed /32), never a more specific part of a block, and it loses to the cluster's
		// own path for it (LOCAL_PREF). Tagged here, decided after the BGPFilters.
		{Name: "tabby-import-explained-from-external", Conditions: &api.Conditions{NeighborSet: match(setExternal), PrefixSet: match(setExplain)},
			Actions: &api.Actions{LocalPref: &api.LocalPrefAction{Value: ExternalLocalPref}, Community: learned}},
		{Name: "tabby-import-unexplained-from-external", Conditions: &api.Conditions{NeighborSet: match(setExternal), PrefixSet: match(setPools), CommunitySet: not(setLearned)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}},
	})), impFilters, bothFamilies([]*api.Statement{
		{Name: "tabby-import-explained-from-external-accept", Conditions: &api.Conditions{NeighborSet: match(setExternal), CommunitySet: match(setLearned)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT, Community: unmark}},
		// Outside the pools only what a BGPFilter accepted, tagged like the rest: never passed
		// on, and below the cluster's own paths.
		{Name: "tabby-import-filtered-from-external", Conditions: &api.Conditions{NeighborSet: match(setExternal), CommunitySet: match(setAccepted)},
			Actions: &api.Actions{LocalPref: &api.LocalPrefAction{Value: ExternalLocalPref}, Community: learned}},
		{Name: "tabby-import-filtered-from-external-accept", Conditions: &api.Conditions{NeighborSet: match(setExternal), CommunitySet: match(setLearned)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT, Community: unmark}},
		{Name: "tabby-import-rest-from-external", Conditions: &api.Conditions{NeighborSet: match(setExternal)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}},
		// A sibling's copy is tagged, and its MED raised so that a path we have first hand
		// always wins over it (GoBGP would otherwise decide on the sibling's router ID and
		// pass its copy on instead of the client's own route).
		{Name: "tabby-import-pools-from-sibling", Conditions: &api.Conditions{NeighborSet: match(setSiblings), PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
				Community: &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: []string{LearnedSiblingCommunity}},
				Med:       &api.MedAction{Type: api.MedAction_TYPE_MOD, Value: 1}}},
		{Name: "tabby-import-pools", Conditions: &api.Conditions{PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT, Community: strip}},
		// Outside the pools from a tabby node: only what a BGPFilter accepted, for this node's
		// use alone.
		{Name: "tabby-import-filtered", Conditions: &api.Conditions{CommunitySet: match(setAccepted)},
			Actions: &api.Actions{Community: learned}},
		{Name: "tabby-import-filtered-accept", Conditions: &api.Conditions{CommunitySet: &api.MatchSet{Type: api.MatchSet_TYPE_ALL, Name: setAcceptedLearned}},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT, Community: unmark}},
	}))}
	exp := &api.Policy{Name: "tabby-export", Statements: slices.Concat(bothFamilies([]*api.Statement{
		{Name: "tabby-export-no-transit", Conditions: &api.Conditions{CommunitySet: match(setLearned)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}},
		// On export the neighbor set matches the receiving peer. A policy reject (unlike
		// GoBGP's CLUSTER_LIST check) withdraws what the sibling had from us before.
		{Name: "tabby-export-not-to-siblings", Conditions: &api.Conditions{NeighborSet: match(setSiblings), CommunitySet: match(setFromSib)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}},
		// Service CIDRs go to external routers (ECMP over every node that peers with them),
		// never to other nodes.
		{Name: "tabby-export-services-not-inside", Conditions: &api.Conditions{NeighborSet: not(setExternal), PrefixSet: match(setServices)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}},
	}), communities, expFilters, bothFamilies([]*api.Statement{
		{Name: "tabby-export-services-to-external", Conditions: &api.Conditions{PrefixSet: match(setServices)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT, Community: strip}},
		{Name: "tabby-export-pools-keep-next-hop", Conditions: &api.Conditions{NeighborSet: match(setKeepNH), PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT, Nexthop: &api.NexthopAction{Unchanged: true}, Community: strip}},
	}), nextHopSelf6(p, strip), bothFamilies([]*api.Statement{
		// Only a route with a mark carries one out: every other route goes out unmodified, the
		// copy all clients of a reflector share, built and serialised once
		// (docs/architecture.md, "GoBGP at scale").
		{Name: "tabby-export-pools-marked", Conditions: &api.Conditions{PrefixSet: match(setPools), CommunitySet: match(setInternal)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT, Community: strip}},
		{Name: "tabby-export-pools", Conditions: &api.Conditions{PrefixSet: match(setPools)},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT}},
	}))}
	return sets, imp, exp
}

// externalIBGP are the external routers in the cluster's AS: those that are neither
// NextHopSelf nor KeepNextHop, the two kinds of eBGP peer.
func (p Policy) externalIBGP() []netip.Addr {
	var out []netip.Addr
	for _, a := range p.External {
		if !slices.Contains(p.NextHopSelf, a) && !slices.Contains(p.KeepNextHop, a) {
			out = append(out, a)
		}
	}
	return out
}

// nextHopSelf6 is the export statement that makes this node the next hop of the IPv6 pool
// routes it passes on to an eBGP peer (p.NextHopSelf), as it already is of its own blocks. GoBGP
// rewrites a relayed route's next hop to the session's local address, an IPv4 address on an
// IPv4 session (BIRD: "Invalid NEXT_HOP attribute - mismatched address family", and the route is
// dropped). Only the global address is sent: a reflector relays routes of nodes on other links,
// for which no link-local address of ours would be right (RFC 2545 section 3). Without an IPv6
// address no session carries IPv6 (apiPeer), so there is nothing to rewrite.
func nextHopSelf6(p Policy, strip *api.CommunityAction) []*api.Statement {
	if !p.IPv6NextHop.IsValid() || len(p.NextHopSelf) == 0 {
		return nil
	}
	return []*api.Statement{{Name: setName6("tabby-export-pools-next-hop-self"),
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: setNextHopSelf}, PrefixSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: setName6(setPools)}},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT, Nexthop: &api.NexthopAction{Address: p.IPv6NextHop.String()}, Community: strip}}}
}

// patchPrefixSets brings the local and explained prefix sets from last to p with the prefixes
// added and removed alone. GoBGP's statements hold the set they were built with: a set replaced
// under the same name (AddDefinedSet with Replace) is never seen by them, while adding to and
// deleting from a set change the one they hold. A failure leaves the sets unknown: the next
// policy is then set whole.
func (g *GoBGP) patchPrefixSets(ctx context.Context, last, p Policy) error {
	if slices.Equal(last.Local, p.Local) && slices.Equal(last.Explained, p.Explained) {
		return nil
	}
	g.lastPolicy = nil
	for _, set := range []struct {
		name     string
		from, to []netip.Prefix
		maxLen   func(netip.Prefix) uint32
	}{{setLocal, last.Local, p.Local, withInside}, {setExplain, last.Explained, p.Explained, exactly}} {
		from, to := familyLists(set.name, set.from), familyLists(set.name, set.to)
		for i := range from {
			add, del := prefixDiff(from[i].prefixes, to[i].prefixes)
			// Adding first keeps the set from ever being empty (see placeholder).
			if len(add) > 0 {
				ds := apiPrefixSet(from[i].name, add, set.maxLen)
				if err := g.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: ds}); err != nil {
					return fmt.Errorf("add to prefix set %s: %w", ds.Name, err)
				}
			}
			if len(del) > 0 {
				ds := apiPrefixSet(from[i].name, del, set.maxLen)
				if err := g.srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: ds}); err != nil {
					return fmt.Errorf("delete from prefix set %s: %w", ds.Name, err)
				}
			}
		}
	}
	g.lastPolicy = &p
	return g.reapplyImportFromExternal(ctx, p.External)
}

// prefixDiff returns what is in to and not in from (add), and the reverse (del).
func prefixDiff(from, to []netip.Prefix) (add, del []netip.Prefix) {
	had := make(map[netip.Prefix]bool, len(from))
	for _, p := range from {
		had[p.Masked()] = true
	}
	seen := make(map[netip.Prefix]bool, len(to))
	for _, p := range to {
		if !had[p.Masked()] && !seen[p.Masked()] {
			add = append(add, p)
		}
		seen[p.Masked()] = true
		delete(had, p.Masked())
	}
	for _, p := range from {
		if had[p.Masked()] {
			del = append(del, p)
			delete(had, p.Masked())
		}
	}
	return add, del
}

// reapplyImportFromExternal re-runs the import policy over what the external routers sent
// (GoBGP keeps every received route before policy).
func (g *GoBGP) reapplyImportFromExternal(ctx context.Context, external []netip.Addr) error {
	if len(external) == 0 {
		return nil
	}
	states, err := g.Peers(ctx)
	if err != nil {
		return err
	}
	for _, st := range states {
		if slices.Contains(external, st.Address) {
			if err := g.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: st.Address.String(), Soft: true, Direction: api.ResetPeerRequest_DIRECTION_IN}); err != nil {
				return fmt.Errorf("re-apply import policy for %s: %w", st.Address, err)
			}
		}
	}
	return nil
}
