package speaker

import (
	"fmt"
	"net/netip"

	api "github.com/osrg/gobgp/v4/api"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The statements of the BGPFilters and of the communities tabby puts on its own routes
// (docs/architecture.md, "Route filters"). A filter rule's Accept cannot end the evaluation
// where tabby's own statements still have to run (the tags, the next hop, the rejections
// after it), and GoBGP has no "go to the next policy": it marks the route with
// FilterAcceptedCommunity and goes on, every later rule skips a marked route, and tabby's
// statements after the rules read the mark. The mark lives inside this speaker only: it is
// stripped from what a peer sends and from every export.

// FilterAcceptedCommunity marks, inside this speaker only, a route that a BGPFilter rule
// accepted.
const FilterAcceptedCommunity = "0:203"

const (
	setAccepted = "tabby-filter-accepted"
	// setAcceptedLearned, matched with ALL: accepted by a filter and tagged learned.
	setAcceptedLearned = "tabby-filter-accepted-learned"
	// setInternal matches what must never leave this speaker on a route tabby sends: the
	// sibling tag and the filter's mark.
	setInternal = "tabby-internal-marks"
)

// internalMarks are the communities tabby strips from what an external router sends (it may
// not forge them) and, but for 0:201 (whose routes are never sent), from every export.
var internalMarks = []string{"^" + LearnedExternalCommunity + "$", "^" + LearnedSiblingCommunity + "$", "^" + FilterAcceptedCommunity + "$"}

func stripInternal() *api.CommunityAction {
	return &api.CommunityAction{Type: api.CommunityAction_TYPE_REMOVE, Communities: internalMarks[1:]}
}

func markSets() []*api.DefinedSet {
	return []*api.DefinedSet{
		{DefinedType: api.DefinedType_DEFINED_TYPE_COMMUNITY, Name: setAccepted, List: []string{"^" + FilterAcceptedCommunity + "$"}},
		{DefinedType: api.DefinedType_DEFINED_TYPE_COMMUNITY, Name: setInternal, List: internalMarks[1:]},
		{DefinedType: api.DefinedType_DEFINED_TYPE_COMMUNITY, Name: setAcceptedLearned, List: []string{internalMarks[0], internalMarks[2]}},
	}
}

// filterStatements are the sets and statements of every chain's rules of one direction, in
// order. A rule matches a route not yet accepted by an earlier rule, from (import) or to
// (export) one of the chain's peers, whose prefix matches the rule's; Reject ends the
// evaluation, Accept marks the route and goes on.
func filterStatements(chains []FilterChain, export bool) ([]*api.DefinedSet, []*api.Statement) {
	dir := "import"
	if export {
		dir = "export"
	}
	var sets []*api.DefinedSet
	var stmts []*api.Statement
	for c, ch := range chains {
		rules := ch.Import
		if export {
			rules = ch.Export
		}
		if len(rules) == 0 {
			continue
		}
		nb := fmt.Sprintf("tabby-filter-%d-peers", c)
		// Without a placeholder an empty neighbor set would match every peer; a chain has
		// peers, but a set must never match by accident.
		nset := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: nb, List: []string{placeholder.String()}}
		for _, a := range ch.Peers {
			nset.List = append(nset.List, ipfamily.HostPrefix(a).String())
		}
		sets = append(sets, nset)
		for i, r := range rules {
			name := fmt.Sprintf("tabby-filter-%d-%s-%d", c, dir, i)
			sets = append(sets, rulePrefixSet(name, r))
			match := api.MatchSet_TYPE_ANY
			if r.Negate {
				match = api.MatchSet_TYPE_INVERT
			}
			act := &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}
			if r.Accept {
				act = &api.Actions{Community: &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: []string{FilterAcceptedCommunity}}}
			}
			cond := func() *api.Conditions {
				return &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: nb}, PrefixSet: &api.MatchSet{Type: match, Name: name},
					CommunitySet: &api.MatchSet{Type: api.MatchSet_TYPE_INVERT, Name: setAccepted}}
			}
			if !r.RemotePeers {
				stmts = append(stmts, &api.Statement{Name: name, Conditions: cond(), Actions: act})
				continue
			}
			// Learned from a peer: iBGP or eBGP, never this node's own (GoBGP's route types).
			for _, rt := range []api.Conditions_RouteType{api.Conditions_ROUTE_TYPE_INTERNAL, api.Conditions_ROUTE_TYPE_EXTERNAL} {
				cd := cond()
				cd.RouteType = rt
				stmts = append(stmts, &api.Statement{Name: fmt.Sprintf("%s-%s", name, rt), Conditions: cd, Actions: act})
			}
		}
	}
	return sets, stmts
}

// rulePrefixSet matches what a rule's prefix matches, without the negation (the statement
// inverts): the prefix and what lies inside it within the lengths, or, without a prefix, every
// route of the rule's family.
func rulePrefixSet(name string, r model.FilterRule) *api.DefinedSet {
	p, lo, hi := r.Prefix, uint32(r.MinLen), uint32(r.MaxLen)
	if !p.IsValid() {
		p, lo, hi = netip.PrefixFrom(netip.IPv4Unspecified(), 0), 0, 32
		if r.Family == ipfamily.IPv6 {
			p, hi = netip.PrefixFrom(netip.IPv6Unspecified(), 0), 128
		}
	}
	return &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: name,
		Prefixes: []*api.Prefix{{IpPrefix: p.String(), MaskLengthMin: lo, MaskLengthMax: hi}}}
}

// communityStatements add the communities of each prefix advertisement to this node's own
// routes equal to or inside its prefix (every advertisement that holds a route adds its own).
// Only this node's own: a route another node originated carries that node's communities
// already, and adding them again would list them twice.
func communityStatements(adv []model.PrefixCommunities) ([]*api.DefinedSet, []*api.Statement) {
	var sets []*api.DefinedSet
	var stmts []*api.Statement
	for i, a := range adv {
		name := fmt.Sprintf("tabby-communities-%d", i)
		sets = append(sets, apiPrefixSet(name, []netip.Prefix{a.Prefix}, withInside))
		act := &api.Actions{}
		if len(a.Standard) > 0 {
			act.Community = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: a.Standard}
		}
		if len(a.Large) > 0 {
			act.LargeCommunity = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: a.Large}
		}
		if act.Community != nil || act.LargeCommunity != nil {
			stmts = append(stmts, &api.Statement{Name: name,
				Conditions: &api.Conditions{PrefixSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: name}, RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
				Actions:    act})
		}
		// LOCAL_PREF only towards external routers of the cluster's AS: between nodes it is what
		// keeps a node's own path for its block ahead of any router's (the import policy's
		// ExternalLocalPref), and eBGP carries none (RFC 4271 5.1.5).
		if a.LocalPref != nil {
			stmts = append(stmts, &api.Statement{Name: name + "-local-pref",
				Conditions: &api.Conditions{PrefixSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: name}, RouteType: api.Conditions_ROUTE_TYPE_LOCAL,
					NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: setExternalIBGP}},
				Actions: &api.Actions{LocalPref: &api.LocalPrefAction{Value: *a.LocalPref}}})
		}
	}
	return sets, stmts
}
