package validation

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

func bgpFilter(name string, spec v1.BGPFilterSpec) *v1.BGPFilter {
	return &v1.BGPFilter{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func plen(v int32) *int32 { return &v }

func communityConfig(communities []v1.Community, adv ...v1.PrefixAdvertisement) *v1.BGPConfiguration {
	return &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{Communities: communities, PrefixAdvertisements: adv}}
}

// filterCases are BGPFilters, BGPPeers' filters and the BGPConfiguration's communities.
var filterCases = []Case{
	{"filter ok", bgpFilter("ok", v1.BGPFilterSpec{
		ImportV4: []v1.BGPFilterRuleV4{{CIDR: "203.0.113.0/24", MatchOperator: v1.BGPFilterEqual, Action: v1.BGPFilterAccept}, {CIDR: "0.0.0.0/0", MatchOperator: v1.BGPFilterEqual, Action: v1.BGPFilterAccept}},
		ExportV4: []v1.BGPFilterRuleV4{{CIDR: "10.244.0.0/16", MatchOperator: v1.BGPFilterIn, PrefixLength: &v1.BGPFilterPrefixLengthV4{Min: plen(26), Max: plen(32)}, Source: v1.BGPFilterSourceRemotePeers, Action: v1.BGPFilterReject}, {Action: v1.BGPFilterAccept}},
		ImportV6: []v1.BGPFilterRuleV6{{CIDR: "2001:db8::/32", MatchOperator: v1.BGPFilterNotIn, Action: v1.BGPFilterReject}},
		ExportV6: []v1.BGPFilterRuleV6{{CIDR: "fd00:10:244::/48", MatchOperator: v1.BGPFilterNotEqual, Action: v1.BGPFilterReject}},
	}), ""},
	{"filter cidr host bits", bgpFilter("hostbits", v1.BGPFilterSpec{ExportV4: []v1.BGPFilterRuleV4{{CIDR: "10.244.0.1/16", MatchOperator: v1.BGPFilterIn, Action: v1.BGPFilterReject}}}), "cidr"},
	{"filter IPv6 cidr in importV4", bgpFilter("fam4", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{CIDR: "2001:db8::/32", MatchOperator: v1.BGPFilterIn, Action: v1.BGPFilterAccept}}}), "importV4"},
	{"filter IPv4 cidr in exportV6", bgpFilter("fam6", v1.BGPFilterSpec{ExportV6: []v1.BGPFilterRuleV6{{CIDR: "10.244.0.0/16", MatchOperator: v1.BGPFilterIn, Action: v1.BGPFilterAccept}}}), "exportV6"},
	{"filter cidr without matchOperator", bgpFilter("noop", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{CIDR: "203.0.113.0/24", Action: v1.BGPFilterAccept}}}), "matchOperator"},
	{"filter matchOperator without cidr", bgpFilter("nocidr", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{MatchOperator: v1.BGPFilterIn, Action: v1.BGPFilterAccept}}}), "cidr"},
	{"filter matchOperator Like", bgpFilter("like", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{CIDR: "203.0.113.0/24", MatchOperator: "Like", Action: v1.BGPFilterAccept}}}), "matchOperator"},
	{"filter action Drop", bgpFilter("drop", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{Action: "Drop"}}}), "action"},
	{"filter prefixLength shorter than cidr", bgpFilter("plshort", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{CIDR: "10.244.0.0/16", MatchOperator: v1.BGPFilterIn, PrefixLength: &v1.BGPFilterPrefixLengthV4{Min: plen(8)}, Action: v1.BGPFilterAccept}}}), "prefixLength"},
	{"filter prefixLength 33", bgpFilter("pl33", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{CIDR: "10.244.0.0/16", MatchOperator: v1.BGPFilterIn, PrefixLength: &v1.BGPFilterPrefixLengthV4{Max: plen(33)}, Action: v1.BGPFilterAccept}}}), "prefixLength"},
	{"filter prefixLength min over max", bgpFilter("plorder", v1.BGPFilterSpec{ImportV6: []v1.BGPFilterRuleV6{{CIDR: "fd00:10:244::/48", MatchOperator: v1.BGPFilterIn, PrefixLength: &v1.BGPFilterPrefixLengthV6{Min: plen(120), Max: plen(64)}, Action: v1.BGPFilterAccept}}}), "prefixLength"},
	{"filter prefixLength 128 in IPv6", bgpFilter("pl128", v1.BGPFilterSpec{ImportV6: []v1.BGPFilterRuleV6{{CIDR: "fd00:10:244::/48", MatchOperator: v1.BGPFilterNotIn, PrefixLength: &v1.BGPFilterPrefixLengthV6{Min: plen(64), Max: plen(128)}, Action: v1.BGPFilterAccept}}}), ""},
	{"filter prefixLength with Equal", bgpFilter("pleq", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{CIDR: "10.244.0.0/16", MatchOperator: v1.BGPFilterEqual, PrefixLength: &v1.BGPFilterPrefixLengthV4{Max: plen(24)}, Action: v1.BGPFilterAccept}}}), "prefixLength"},
	{"filter source on import", bgpFilter("srcimp", v1.BGPFilterSpec{ImportV4: []v1.BGPFilterRuleV4{{Source: v1.BGPFilterSourceRemotePeers, Action: v1.BGPFilterReject}}}), "source"},
	{"peer filters", peer("tor-filtered", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, Filters: []string{"a", "b"}}), ""},
	{"peer filters empty name", peer("tor-filter-empty", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, Filters: []string{""}}), "filters"},
	{"peer filters twice", peer("tor-filter-twice", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, Filters: []string{"a", "a"}}), "filters"},
	{"bgpconfig communities", communityConfig([]v1.Community{{Name: "rack", Value: "65001:100"}, {Name: "big", Value: "4200000000:1:2"}},
		v1.PrefixAdvertisement{CIDR: "10.244.0.0/16", Communities: []v1.CommunityRef{"rack", "65001:200", "big"}},
		v1.PrefixAdvertisement{CIDR: "fd00:10:244::/48", Communities: []v1.CommunityRef{"65535:65281"}}), ""},
	{"bgpconfig community 0:201", communityConfig([]v1.Community{{Name: "mine", Value: "0:201"}}), "communities[0].value"},
	{"bgpconfig community 65536:1", communityConfig([]v1.Community{{Name: "big", Value: "65536:1"}}), "communities[0].value"},
	{"bgpconfig community name twice", communityConfig([]v1.Community{{Name: "a", Value: "65001:1"}, {Name: "a", Value: "65001:2"}}), "communities[1]"},
	{"bgpconfig advertisement unknown name", communityConfig(nil, v1.PrefixAdvertisement{CIDR: "10.244.0.0/16", Communities: []v1.CommunityRef{"nosuch"}}), "prefixAdvertisements"},
	{"bgpconfig advertisement bad value", communityConfig(nil, v1.PrefixAdvertisement{CIDR: "10.244.0.0/16", Communities: []v1.CommunityRef{"65001:70000"}}), "prefixAdvertisements[0].communities[0]"},
	{"bgpconfig advertisement localPref alone", communityConfig(nil, v1.PrefixAdvertisement{CIDR: "203.0.113.144/28", LocalPref: u32(200)}), ""},
	{"bgpconfig advertisement empty", communityConfig(nil, v1.PrefixAdvertisement{CIDR: "203.0.113.144/28"}), "prefixAdvertisements[0].communities"},
	{"bgpconfig advertisement cidr host bits", communityConfig(nil, v1.PrefixAdvertisement{CIDR: "10.244.0.1/16", Communities: []v1.CommunityRef{"65001:1"}}), "prefixAdvertisements[0].cidr"},
}

func init() { Cases = append(Cases, filterCases...) }
