package speaker

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	api "github.com/osrg/gobgp/v4/api"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// route is a path as the policy sees it: where it comes from (invalid: this node's own) and
// what it carries.
type route struct {
	prefix      netip.Prefix
	from        netip.Addr
	ibgp        bool
	communities []string
}

// verdict is what a policy made of a route.
type verdict struct {
	accept      bool
	localPref   uint32
	communities []string
	large       []string
}

// evaluate runs a policy over r as GoBGP's engine does (internal/pkg/table/policy.go): the
// statements in order, a statement's modifications kept, the first accept or reject final, the
// default reject. to is the receiving peer on export. It knows the conditions and actions tabby
// uses, no more: a fake for the decision table, the real sessions are in bird's tests.
func evaluate(t *testing.T, sets []*api.DefinedSet, pol *api.Policy, r route, to netip.Addr) verdict {
	t.Helper()
	byName := map[string]*api.DefinedSet{}
	for _, s := range sets {
		byName[s.Name] = s
	}
	set := func(name string) *api.DefinedSet {
		s := byName[name]
		if s == nil {
			t.Fatalf("statement refers to set %q, which the policy does not define", name)
		}
		return s
	}
	v := verdict{communities: slices.Clone(r.communities)}
	anyRe := func(list []string, cs []string) bool {
		for _, re := range list {
			for _, c := range cs {
				if regexp.MustCompile(re).MatchString(c) {
					return true
				}
			}
		}
		return false
	}
	for _, st := range pol.Statements {
		c := st.Conditions
		ok := true
		if m := c.GetNeighborSet(); m != nil {
			addr := r.from
			if to.IsValid() {
				addr = to
			}
			in := false
			for _, p := range set(m.Name).List {
				in = in || netip.MustParsePrefix(p).Contains(addr)
			}
			ok = ok && addr.IsValid() && in == (m.Type == api.MatchSet_TYPE_ANY)
		}
		if m := c.GetPrefixSet(); m != nil {
			ps := set(m.Name).Prefixes
			first := netip.MustParsePrefix(ps[0].IpPrefix)
			if first.Addr().Is4() != r.prefix.Addr().Is4() {
				ok = false
			} else {
				in := false
				for _, p := range ps {
					pp := netip.MustParsePrefix(p.IpPrefix)
					in = in || pp.Contains(r.prefix.Addr()) && uint32(r.prefix.Bits()) >= p.MaskLengthMin && uint32(r.prefix.Bits()) <= p.MaskLengthMax
				}
				ok = ok && in == (m.Type == api.MatchSet_TYPE_ANY)
			}
		}
		if m := c.GetCommunitySet(); m != nil {
			if m.Type == api.MatchSet_TYPE_ALL {
				for _, re := range set(m.Name).List {
					ok = ok && anyRe([]string{re}, v.communities)
				}
			} else {
				ok = ok && anyRe(set(m.Name).List, v.communities) == (m.Type == api.MatchSet_TYPE_ANY)
			}
		}
		if m := c.GetAsPathSet(); m != nil {
			t.Fatalf("statement %s: AS-path conditions are not evaluated here", st.Name)
		}
		switch c.GetRouteType() {
		case api.Conditions_ROUTE_TYPE_LOCAL:
			ok = ok && !r.from.IsValid()
		case api.Conditions_ROUTE_TYPE_INTERNAL:
			ok = ok && r.from.IsValid() && r.ibgp
		case api.Conditions_ROUTE_TYPE_EXTERNAL:
			ok = ok && r.from.IsValid() && !r.ibgp
		}
		if !ok {
			continue
		}
		a := st.Actions
		if ca := a.GetCommunity(); ca != nil {
			switch ca.Type {
			case api.CommunityAction_TYPE_ADD:
				v.communities = append(v.communities, ca.Communities...)
			case api.CommunityAction_TYPE_REMOVE:
				v.communities = slices.DeleteFunc(v.communities, func(c string) bool { return anyRe(ca.Communities, []string{c}) })
			default:
				t.Fatalf("statement %s: community action %v", st.Name, ca.Type)
			}
		}
		if la := a.GetLargeCommunity(); la != nil {
			v.large = append(v.large, la.Communities...)
		}
		if lp := a.GetLocalPref(); lp != nil {
			v.localPref = lp.Value
		}
		switch a.GetRouteAction() {
		case api.RouteAction_ROUTE_ACTION_ACCEPT:
			v.accept = true
			return v
		case api.RouteAction_ROUTE_ACTION_REJECT:
			return verdict{}
		}
	}
	return verdict{}
}

var (
	tor      = netip.MustParseAddr("198.51.100.1")
	tor2     = netip.MustParseAddr("198.51.100.2")
	nodeB    = netip.MustParseAddr("198.51.100.12")
	tor3     = netip.MustParseAddr("198.51.100.3")
	tor6     = netip.MustParseAddr("2001:db8:100::1")
	pfx      = netip.MustParsePrefix
	own      = pfx("10.244.1.0/26")
	own2     = pfx("10.244.1.64/26")
	other    = pfx("10.244.2.0/26") // another node's block: explained
	own6     = pfx("fd00:10:244::/122")
	other6   = pfx("fd00:10:244::40/122")
	services = pfx("10.96.0.0/12")
)

func rule(fam ipfamily.Family, accept bool, prefix string, lo, hi uint8) model.FilterRule {
	r := model.FilterRule{Family: fam, Accept: accept}
	if prefix != "" {
		r.Prefix, r.MinLen, r.MaxLen = pfx(prefix), lo, hi
	}
	return r
}

// filterPolicy: a node with two blocks of its own in a dual-stack pool, a ToR with filters
// (tor, and its IPv6 twin), one without (tor2), and a tabby node with its own.
func filterPolicy() Policy {
	v4, v6 := ipfamily.IPv4, ipfamily.IPv6
	return Policy{
		Pools: []netip.Prefix{pfx("10.244.0.0/16"), pfx("fd00:10:244::/48")}, Local: []netip.Prefix{own, own2, own6},
		Services: []netip.Prefix{services}, External: []netip.Addr{tor, tor2, tor3, tor6}, NextHopSelf: []netip.Addr{tor, tor2, tor3},
		Explained: []netip.Prefix{own, own2, other, pfx("10.244.3.0/26"), own6, other6},
		Communities: []model.PrefixCommunities{{Prefix: pfx("10.244.0.0/16"), Standard: []string{"65001:100"}, Large: []string{"65001:1:2"}},
			{Prefix: services, Standard: []string{"65001:300"}}},
		Filters: []FilterChain{
			{Peers: []netip.Addr{tor, tor6},
				Import: []model.FilterRule{
					rule(v4, false, "10.244.2.0/26", 26, 26), // a block the ToR announces legitimately
					rule(v4, true, "203.0.113.0/24", 24, 24), // a route outside the pools
					rule(v4, true, "0.0.0.0/0", 0, 0),        // a default route
					rule(v4, true, "10.244.0.0/16", 16, 32),  // a hijack of our blocks: safety first
					rule(v4, true, "10.96.0.0/12", 12, 32),   // services are never taken
					rule(v6, false, "fd00:10:244::40/122", 122, 122),
					rule(v6, true, "2001:db8:ffff::/48", 48, 48),
					rule(v4, false, "", 0, 0), // the rest of IPv4 from this ToR
				},
				Export: []model.FilterRule{
					rule(v4, false, "10.244.1.0/26", 26, 26),
					{Family: v4, Prefix: pfx("10.244.1.64/26"), MinLen: 26, MaxLen: 26, Accept: true},     // shields it from the next rule
					{Family: v4, Prefix: pfx("10.244.0.0/16"), MinLen: 16, MaxLen: 32, RemotePeers: true}, // what this node passes on
					rule(v4, true, "", 0, 0), // everything else: no more than tabby sends anyway
				}},
			{Peers: []netip.Addr{tor3}, Export: []model.FilterRule{rule(v4, false, "10.96.0.0/12", 12, 32)}},
			{Peers: []netip.Addr{nodeB},
				Import: []model.FilterRule{{Family: v4, Prefix: pfx("10.244.5.0/24"), MinLen: 24, MaxLen: 32, Negate: true, Accept: true}},
				Export: []model.FilterRule{{Family: v4, Prefix: pfx("10.244.1.0/26"), MinLen: 26, MaxLen: 26, Negate: true}}},
		},
	}
}

// TestFilterDecisions: what each rule makes of a route, after tabby's safety rules: a filter
// that accepts a hijack, a service, an unexplained prefix inside a pool or a learned external
// route for export is still refused; an export Accept sends nothing tabby would not send.
func TestFilterDecisions(t *testing.T) {
	sets, imp, exp := policyObjects(filterPolicy())
	learned := []string{LearnedExternalCommunity}
	for _, c := range []struct {
		name   string
		export bool
		r      route
		to     netip.Addr
		accept bool
		lp     uint32
		comm   []string // communities after the policy, in order
		large  []string
	}{
		// Import.
		{name: "ToR's route outside the pools, accepted by a rule", r: route{prefix: pfx("203.0.113.0/24"), from: tor}, accept: true, lp: ExternalLocalPref, comm: learned},
		{name: "ToR's default route, accepted by a rule", r: route{prefix: pfx("0.0.0.0/0"), from: tor}, accept: true, lp: ExternalLocalPref, comm: learned},
		{name: "ToR's more specific of the accepted /24: Equal", r: route{prefix: pfx("203.0.113.0/25"), from: tor}},
		{name: "ToR's explained block, rejected by a rule", r: route{prefix: other, from: tor}},
		{name: "ToR's other explained block, accepted by a rule", r: route{prefix: pfx("10.244.3.0/26"), from: tor}, accept: true, lp: ExternalLocalPref, comm: learned},
		{name: "ToR's route outside the pools, rejected by the catch-all rule", r: route{prefix: pfx("198.51.100.0/24"), from: tor}},
		{name: "hijack of our block accepted by a rule", r: route{prefix: own, from: tor}},
		{name: "hijack of part of our block accepted by a rule", r: route{prefix: pfx("10.244.1.0/27"), from: tor}},
		{name: "unexplained prefix in a pool accepted by a rule", r: route{prefix: pfx("10.244.9.0/26"), from: tor}},
		{name: "service CIDR accepted by a rule", r: route{prefix: services, from: tor}},
		{name: "unexplained prefix with a forged learned mark", r: route{prefix: pfx("10.244.9.0/26"), from: tor, communities: learned}},
		{name: "forged filter mark on a route no rule accepts", r: route{prefix: pfx("198.51.100.0/24"), from: tor2, communities: []string{FilterAcceptedCommunity}}},
		{name: "ToR without filters: its explained block", r: route{prefix: other, from: tor2, communities: []string{"65000:1"}}, accept: true, lp: ExternalLocalPref, comm: []string{"65000:1", LearnedExternalCommunity}},
		{name: "ToR without filters: outside the pools", r: route{prefix: pfx("203.0.113.0/24"), from: tor2}},
		{name: "IPv6 explained block, rejected by a rule", r: route{prefix: other6, from: tor6}},
		{name: "IPv6 outside the pools, accepted by a rule", r: route{prefix: pfx("2001:db8:ffff::/48"), from: tor6}, accept: true, lp: ExternalLocalPref, comm: learned},
		{name: "IPv6 hijack: no rule needed", r: route{prefix: own6, from: tor6}},
		{name: "tabby node's block, NotIn-accepted", r: route{prefix: pfx("10.244.7.0/26"), from: nodeB, ibgp: true}, accept: true},
		{name: "tabby node's block, no rule matches: the default", r: route{prefix: pfx("10.244.5.0/26"), from: nodeB, ibgp: true}, accept: true},
		{name: "tabby node's route outside the pools, NotIn-accepted: this node's alone", r: route{prefix: pfx("198.51.100.0/24"), from: nodeB, ibgp: true}, accept: true, comm: learned},
		// Export.
		{name: "own block rejected by a rule", export: true, r: route{prefix: own}, to: tor},
		{name: "own block shielded by an Accept, with the cluster's communities", export: true, r: route{prefix: own2}, to: tor, accept: true, comm: []string{"65001:100"}, large: []string{"65001:1:2"}},
		{name: "own block to a ToR without filters", export: true, r: route{prefix: own}, to: tor2, accept: true, comm: []string{"65001:100"}, large: []string{"65001:1:2"}},
		{name: "another node's block: source RemotePeers", export: true, r: route{prefix: pfx("10.244.5.0/26"), from: nodeB, ibgp: true, communities: []string{"65001:100"}}, to: tor},
		{name: "another node's block to a ToR without filters: its communities once", export: true, r: route{prefix: pfx("10.244.5.0/26"), from: nodeB, ibgp: true, communities: []string{"65001:100"}}, to: tor2, accept: true, comm: []string{"65001:100"}},
		{name: "learned external route: never passed on, whatever the rules", export: true, r: route{prefix: pfx("203.0.113.0/24"), from: tor, communities: learned}, to: tor2},
		{name: "learned external route to a tabby node", export: true, r: route{prefix: pfx("203.0.113.0/24"), from: tor, communities: learned}, to: nodeB},
		{name: "service CIDR to a ToR, accepted by the catch-all", export: true, r: route{prefix: services}, to: tor, accept: true, comm: []string{"65001:300"}},
		{name: "service CIDR rejected by a rule", export: true, r: route{prefix: services}, to: tor3},
		{name: "own block to the ToR whose rules are about services", export: true, r: route{prefix: own}, to: tor3, accept: true, comm: []string{"65001:100"}, large: []string{"65001:1:2"}},
		{name: "service CIDR never to a tabby node", export: true, r: route{prefix: services}, to: nodeB},
		{name: "own block to the tabby node: its NotEqual rejects the other", export: true, r: route{prefix: own2}, to: nodeB},
		{name: "own block to the tabby node: NotEqual's own prefix goes", export: true, r: route{prefix: own}, to: nodeB, accept: true, comm: []string{"65001:100"}, large: []string{"65001:1:2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pol := imp
			if c.export {
				pol = exp
			}
			v := evaluate(t, sets, pol, c.r, c.to)
			if v.accept != c.accept {
				t.Fatalf("accepted %v, want %v", v.accept, c.accept)
			}
			if !c.accept {
				return
			}
			if v.localPref != c.lp || !slices.Equal(v.communities, c.comm) || !slices.Equal(v.large, c.large) {
				t.Fatalf("LOCAL_PREF %d communities %v large %v, want %d %v %v", v.localPref, v.communities, v.large, c.lp, c.comm, c.large)
			}
		})
	}
}

// TestFilterStatementsInOrder: the rules become statements in the chain's order, after every
// safety statement and before tabby's defaults, each skipping what an earlier Accept marked.
func TestFilterStatementsInOrder(t *testing.T) {
	_, imp, exp := policyObjects(filterPolicy())
	for _, pol := range []*api.Policy{imp, exp} {
		var names []string
		for _, st := range pol.Statements {
			names = append(names, st.Name)
		}
		first := slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "tabby-filter-") })
		last := first
		for i, n := range names {
			if strings.HasPrefix(n, "tabby-filter-") {
				last = i
			}
		}
		for _, safety := range []string{"tabby-import-own-from-external", "tabby-import-no-services", "tabby-import-unexplained-from-external", "tabby-export-no-transit", "tabby-export-services-not-inside"} {
			if i := slices.Index(names, safety); i >= 0 && i > first {
				t.Errorf("%s: safety statement %s after the first filter statement:\n%s", pol.Name, safety, strings.Join(names, "\n"))
			}
		}
		for i, n := range names[first : last+1] {
			if !strings.HasPrefix(n, "tabby-filter-") {
				t.Errorf("%s: %s among the filter statements", pol.Name, n)
			}
			if st := pol.Statements[first+i]; st.Conditions.GetCommunitySet().GetName() != setAccepted || st.Conditions.GetCommunitySet().GetType() != api.MatchSet_TYPE_INVERT {
				t.Errorf("%s: %s does not skip an accepted route", pol.Name, n)
			}
		}
	}
}
