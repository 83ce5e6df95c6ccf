package bird

import (
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// filterUpdate is the message of a BGPFilter, parsed as the syncer parses it.
func filterUpdate(t testing.TB, name string, spec v1.BGPFilterSpec) model.BGPFilterUpdate {
	t.Helper()
	f, errs := validation.ParseBGPFilter(&v1.BGPFilter{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	if len(errs) > 0 {
		t.Fatalf("BGPFilter %s: %v", name, errs)
	}
	return model.BGPFilterUpdate{Filter: f}
}

// communitiesConfig is a BGPConfiguration that tags the pools' routes.
func communitiesConfig() *v1.BGPConfiguration {
	return &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultBGPConfigurationName}, Spec: v1.BGPConfigurationSpec{
		Communities: []v1.Community{{Name: "rack", Value: "65001:100"}},
		PrefixAdvertisements: []v1.PrefixAdvertisement{
			{CIDR: pool.String(), Communities: []v1.CommunityRef{"rack", "65001:1:2"}},
			{CIDR: pool6.String(), Communities: []v1.CommunityRef{"65001:600"}},
		}}}
}

// gobgpRIB is the speaker's RIB of a family as the stock gobgp CLI shows it.
func gobgpRIB(t *testing.T, cli, port, family string) string {
	t.Helper()
	out, err := exec.Command(cli, "-u", "127.0.0.1", "-p", port, "global", "rib", "-a", family).CombinedOutput()
	if err != nil {
		t.Fatalf("gobgp global rib -a %s: %v\n%s", family, err, out)
	}
	return string(out)
}

// TestBGPFilterBIRD2: a BGPFilter on a BIRD2 ToR's BGPPeer, both families over one MP-BGP
// session. Export: the ToR lacks the block a rule rejects and has the node's other one, tagged
// with the BGPConfiguration's communities. Import: a prefix outside the pools that a rule
// accepts is in tabby's RIB (never passed on); a block the ToR
// announces legitimately that a rule rejects is not taken, and a rule that accepts part of the
// node's own block or a prefix IPAM does not explain changes nothing. A changed filter, and
// changed communities, apply without resetting the session; a deleted filter keeps the session
// down and says why.
func TestBGPFilterBIRD2(t *testing.T) {
	netnstest.Require(t)
	cli := gobgpCLI(t)
	tor, nodeAddr := netip.MustParseAddr("198.51.100.247"), netip.MustParseAddr("198.51.100.93")
	tor6, node6 := netip.MustParseAddr("2001:db8:100::247"), netip.MustParsePrefix("2001:db8:100::93/64")
	ns := torNamespace6(t, nodeAddr, tor, node6, tor6)
	external, external6 := netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:ffff::/48")
	unwanted := netip.MustParsePrefix("198.51.100.0/25") // outside the pools, no rule for it
	// Inside the pool, accepted by a rule, refused by tabby's safety rules all the same: part of
	// the node's own block, and a prefix IPAM does not explain.
	hijack, unexplained := netip.MustParsePrefix("10.244.93.0/27"), netip.MustParsePrefix("10.244.93.128/26")
	birdc := birdToR{Addr: tor, Node: nodeAddr, AS: 65000, NodeAS: v1.DefaultASNumber, IPv6: true, Addr6: tor6,
		Announce: []netip.Prefix{external, unwanted, otherRack, hijack, unexplained, external6, block6Of(230)}}.start(t, ns)
	// The node's two blocks of each family: the export rules reject the second.
	kept, dropped := blockOf(93), netip.MustParsePrefix("10.244.93.64/26")
	kept6, dropped6 := block6Of(93), netip.MustParsePrefix("fd00:10:244:5d::40/122")
	n := withIPv6Address(mkNode(93, nil, ""), node6)
	eq := v1.BGPFilterEqual
	spec := v1.BGPFilterSpec{
		ImportV4: []v1.BGPFilterRuleV4{{CIDR: external.String(), MatchOperator: eq, Action: v1.BGPFilterAccept}, {CIDR: otherRack.String(), MatchOperator: eq, Action: v1.BGPFilterReject},
			{CIDR: pool.String(), MatchOperator: v1.BGPFilterIn, Action: v1.BGPFilterAccept}},
		ImportV6: []v1.BGPFilterRuleV6{{CIDR: "2001:db8::/32", MatchOperator: v1.BGPFilterIn, Action: v1.BGPFilterAccept}, {CIDR: block6Of(230).String(), MatchOperator: eq, Action: v1.BGPFilterReject}},
		ExportV4: []v1.BGPFilterRuleV4{{CIDR: dropped.String(), MatchOperator: eq, Action: v1.BGPFilterReject}},
		ExportV6: []v1.BGPFilterRuleV6{{CIDR: dropped6.String(), MatchOperator: eq, Action: v1.BGPFilterReject}},
	}
	const port = "50193"
	a := startNode(t, n, []model.Node{n}, func(b *Bird) {
		send(b, confUpdate(communitiesConfig()), filterUpdate(t, "tor", spec))
		send(b, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: tor.String(), ASNumber: 65000, Filters: []string{"tor"}}})...)
		send(b, poolUpdate(pool6), claim(dropped, n.Name), claim(dropped6, n.Name))
		send(b, claims6(93, 230)...)
	}, func(c *Config) { c.GoBGPAPI = "127.0.0.1:" + port })
	up := a.waitPeer(t, tor, "established", 30*time.Second)
	if strings.Join(up.Filters, ",") != "tor" {
		t.Fatalf("status shows filters %v, want [tor]", up.Filters)
	}

	torHas := func(p netip.Prefix) (bool, string) {
		out := birdc("show", "route", "for", p.String(), "all")
		return strings.Contains(out, p.String()+" ") || strings.Contains(out, p.String()+"\n") || strings.Contains(out, "BGP.origin"), out
	}
	// Export: the kept blocks with the communities, the dropped ones never.
	for _, c := range []struct {
		block netip.Prefix
		want  []string
	}{{kept, []string{"BGP.community: (65001,100)", "BGP.large_community: (65001, 1, 2)"}}, {kept6, []string{"BGP.community: (65001,600)"}}} {
		waitFor(t, fmt.Sprintf("BIRD2 lacks %s with %v", c.block, c.want), time.Now(), 15*time.Second, func() bool {
			has, out := torHas(c.block)
			for _, w := range c.want {
				has = has && strings.Contains(out, w)
			}
			return has
		}, func() string { return birdc("show", "route", "all") })
		_, out := torHas(c.block)
		t.Logf("BIRD2: %s", out)
	}
	// The kept blocks are there: had the dropped ones been sent, they would be too by now.
	for _, p := range []netip.Prefix{dropped, dropped6} {
		if has, out := torHas(p); has {
			t.Fatalf("BIRD2 has %s, which the export rule rejects:\n%s", p, out)
		}
	}

	// Import: the accepted external prefixes in the RIB, tagged never to be passed on.
	rib := func() string { return gobgpRIB(t, cli, port, "ipv4") + gobgpRIB(t, cli, port, "ipv6") }
	waitFor(t, "tabby's RIB lacks the accepted external prefixes", time.Now(), 15*time.Second, func() bool {
		r := rib()
		return strings.Contains(r, external.String()) && strings.Contains(r, external6.String())
	}, rib)
	// Everything BIRD2 announces is in: of IPv4 the accepted external prefix alone.
	waitReceived(t, a, tor, map[string][2]uint64{"ipv4": {5, 1}, "ipv6": {2, 1}})
	r := rib()
	t.Logf("tabby's RIB:\n%s", r)
	for _, p := range []netip.Prefix{otherRack, block6Of(230), unwanted, hijack, unexplained} {
		if strings.Contains(r, p.String()) {
			t.Fatalf("tabby's RIB has %s, which no rule accepts or a rule rejects:\n%s", p, r)
		}
	}
	for _, line := range strings.Split(r, "\n") {
		if (strings.Contains(line, external.String()) || strings.Contains(line, external6.String())) && !strings.Contains(line, "0:201") {
			t.Fatalf("accepted external route not tagged 0:201 (never passed on): %s", line)
		}
	}
	if _, ok := a.routes.get(otherRack); ok {
		t.Fatalf("%s reached the dataplane", otherRack)
	}

	// A changed filter: the rejections go, live.
	spec.ImportV4, spec.ImportV6 = spec.ImportV4[:1], spec.ImportV6[:1]
	spec.ExportV4, spec.ExportV6 = nil, nil
	changed := time.Now()
	send(a.bird, filterUpdate(t, "tor", spec))
	a.routes.waitRoute(t, otherRack, tor, 15*time.Second)
	a.routes.waitRoute(t, block6Of(230), tor6, 15*time.Second)
	for _, p := range []netip.Prefix{dropped, dropped6} {
		waitFor(t, "BIRD2 lacks "+p.String()+" once the export rule is gone", time.Now(), 15*time.Second, func() bool { has, _ := torHas(p); return has },
			func() string { return birdc("show", "route", "all") })
	}
	t.Logf("filter change → both rejected blocks at BIRD2, both rejected routes in the dataplane: %v", time.Since(changed))
	now := a.waitPeer(t, tor, "established", time.Second)
	if !now.Since.Equal(up.Since) {
		t.Fatalf("the session was reset by a filter change: established since %v, was %v", now.Since, up.Since)
	}

	// New communities, live too.
	conf := communitiesConfig()
	conf.Spec.Communities[0].Value = "65001:200"
	send(a.bird, confUpdate(conf))
	waitFor(t, "BIRD2 lacks the new community on "+kept.String(), time.Now(), 15*time.Second, func() bool {
		_, out := torHas(kept)
		return strings.Contains(out, "BGP.community: (65001,200)") && !strings.Contains(out, "(65001,100)")
	}, func() string { _, out := torHas(kept); return out })
	if now := a.waitPeer(t, tor, "established", time.Second); !now.Since.Equal(up.Since) {
		t.Fatalf("the session was reset by a change of communities: established since %v, was %v", now.Since, up.Since)
	}

	// The filter deleted: the session stays down, and the status says why.
	send(a.bird, model.BGPFilterRemove{Name: "tor"})
	st := a.waitPeer(t, tor, "not configured", 15*time.Second)
	if !strings.Contains(st.Info, `BGPFilter "tor" does not exist`) {
		t.Fatalf("status of a peer whose filter is gone: %+v", st)
	}
	waitFor(t, "BIRD2 keeps the session", time.Now(), 15*time.Second, func() bool { return !strings.Contains(birdc("show", "protocols", "node"), "Established") },
		func() string { return birdc("show", "protocols", "all", "node") })
}

// TestBGPFilterFRR: the same with FRR as the ToR, In/NotIn rules with prefix lengths, and an
// export Accept that shields a block from a later Reject: FRR has the node's kept blocks with
// the communities (`show bgp ipv4 unicast X`) and not the rejected ones; tabby takes the
// external prefixes a rule accepts and not the block a rule rejects.
func TestBGPFilterFRR(t *testing.T) {
	netnstest.Require(t)
	cli := gobgpCLI(t)
	tor, nodeAddr := netip.MustParseAddr("198.51.100.246"), netip.MustParseAddr("198.51.100.94")
	tor6, node6 := netip.MustParseAddr("2001:db8:100::246"), netip.MustParsePrefix("2001:db8:100::94/64")
	ns := torNamespace6(t, nodeAddr, tor, node6, tor6)
	vtysh := startFRRToR(t, ns, tor, 65000, v1.DefaultASNumber, true, []netip.Addr{nodeAddr})
	external, external6 := netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:ffff::/48")
	kept, dropped := blockOf(94), netip.MustParsePrefix("10.244.94.64/26")
	kept6, dropped6 := block6Of(94), netip.MustParsePrefix("fd00:10:244:5e::40/122")
	n := withIPv6Address(mkNode(94, nil, ""), node6)
	spec := v1.BGPFilterSpec{
		ImportV4: []v1.BGPFilterRuleV4{
			{CIDR: "203.0.112.0/22", MatchOperator: v1.BGPFilterIn, PrefixLength: &v1.BGPFilterPrefixLengthV4{Min: ptr(int32(24)), Max: ptr(int32(24))}, Action: v1.BGPFilterAccept},
			{CIDR: pool.String(), MatchOperator: v1.BGPFilterIn, Action: v1.BGPFilterReject}},
		ImportV6: []v1.BGPFilterRuleV6{
			{CIDR: block6Of(230).String(), MatchOperator: v1.BGPFilterEqual, Action: v1.BGPFilterReject},
			{CIDR: "fd00::/8", MatchOperator: v1.BGPFilterNotIn, Action: v1.BGPFilterAccept}},
		ExportV4: []v1.BGPFilterRuleV4{{CIDR: dropped.String(), MatchOperator: v1.BGPFilterEqual, Action: v1.BGPFilterReject}},
		ExportV6: []v1.BGPFilterRuleV6{
			{CIDR: kept6.String(), MatchOperator: v1.BGPFilterEqual, Action: v1.BGPFilterAccept},
			{CIDR: pool6.String(), MatchOperator: v1.BGPFilterIn, Action: v1.BGPFilterReject}},
	}
	const port = "50194"
	a := startNode(t, n, []model.Node{n}, func(b *Bird) {
		send(b, confUpdate(communitiesConfig()), filterUpdate(t, "tor", spec))
		send(b, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: tor.String(), ASNumber: 65000, Filters: []string{"tor"}}})...)
		send(b, poolUpdate(pool6), claim(dropped, n.Name), claim(dropped6, n.Name))
		send(b, claims6(94, 230)...)
	}, func(c *Config) { c.GoBGPAPI = "127.0.0.1:" + port })
	a.waitPeer(t, tor, "established", 30*time.Second)
	conf := fmt.Sprintf("configure terminal\nrouter bgp 65000\nno bgp network import-check\naddress-family ipv4 unicast\nnetwork %s\nnetwork %s\nexit-address-family\naddress-family ipv6 unicast\nnetwork %s\nnetwork %s\nexit-address-family\nend",
		external, otherRack, external6, block6Of(230))
	if out := vtysh(conf); strings.TrimSpace(out) != "" {
		t.Fatalf("FRR refused the announcements: %s", out)
	}

	show := func(p netip.Prefix) string {
		fam := "ipv4"
		if p.Addr().Is6() {
			fam = "ipv6"
		}
		return vtysh(fmt.Sprintf("show bgp %s unicast %s", fam, p))
	}
	for _, c := range []struct {
		block netip.Prefix
		want  []string
	}{{kept, []string{"Community: 65001:100", "Large Community: 65001:1:2"}}, {kept6, []string{"Community: 65001:600"}}} {
		waitFor(t, fmt.Sprintf("FRR lacks %s with %v", c.block, c.want), time.Now(), 15*time.Second, func() bool {
			out := show(c.block)
			ok := !strings.Contains(out, "not in table")
			for _, w := range c.want {
				ok = ok && strings.Contains(out, w)
			}
			return ok
		}, func() string { return show(c.block) + vtysh("show bgp summary") })
		t.Logf("FRR: %s", show(c.block))
	}
	for _, p := range []netip.Prefix{dropped, dropped6} {
		if out := show(p); !strings.Contains(out, "not in table") {
			t.Fatalf("FRR has %s, which the export rules reject:\n%s", p, out)
		}
	}
	rib := func() string { return gobgpRIB(t, cli, port, "ipv4") + gobgpRIB(t, cli, port, "ipv6") }
	waitFor(t, "tabby's RIB lacks the accepted external prefixes", time.Now(), 15*time.Second, func() bool {
		r := rib()
		return strings.Contains(r, external.String()) && strings.Contains(r, external6.String())
	}, func() string {
		return rib() + vtysh("show running-config") + vtysh("show bgp ipv4 unicast") + vtysh(fmt.Sprintf("show bgp neighbor %s advertised-routes", nodeAddr))
	})
	// Everything FRR announces is in (with the kept block FRR sends back), and a rule rejected
	// one of each family.
	waitReceived(t, a, tor, map[string][2]uint64{"ipv4": {3, 1}, "ipv6": {3, 1}})
	r := rib()
	for _, p := range []netip.Prefix{otherRack, block6Of(230)} {
		if strings.Contains(r, p.String()) {
			t.Fatalf("tabby's RIB has %s, which a rule rejects:\n%s", p, r)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// waitReceived waits until the session with addr has received and accepted what want says of
// each family (the status's counts: family → received, accepted).
func waitReceived(t *testing.T, a *testNode, addr netip.Addr, want map[string][2]uint64) {
	t.Helper()
	var last PeerStatus
	waitFor(t, fmt.Sprintf("session with %s has not received and accepted %v", addr, want), time.Now(), 15*time.Second, func() bool {
		last = a.waitPeer(t, addr, "established", time.Second)
		got := map[string][2]uint64{}
		for _, f := range last.Families {
			got[f.Family] = [2]uint64{f.Received, f.Accepted}
		}
		return maps.Equal(got, want)
	}, func() string { return fmt.Sprintf("%+v", last) })
}
