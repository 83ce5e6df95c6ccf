package validation

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// TestParseBGPFilter: the parsed rules carry the family, the range of prefix lengths each
// operator matches and the lists' order, IPv4's before IPv6's.
func TestParseBGPFilter(t *testing.T) {
	f, errs := ParseBGPFilter(bgpFilter("f", v1.BGPFilterSpec{
		ImportV4: []v1.BGPFilterRuleV4{{CIDR: "10.0.0.0/8", MatchOperator: v1.BGPFilterIn, PrefixLength: &v1.BGPFilterPrefixLengthV4{Min: plen(16), Max: plen(24)}, Action: v1.BGPFilterAccept}, {Action: v1.BGPFilterReject}},
		ImportV6: []v1.BGPFilterRuleV6{{CIDR: "2001:db8::/32", MatchOperator: v1.BGPFilterNotEqual, Action: v1.BGPFilterReject}},
		ExportV4: []v1.BGPFilterRuleV4{{CIDR: "10.244.1.0/26", MatchOperator: v1.BGPFilterEqual, Source: v1.BGPFilterSourceRemotePeers, Action: v1.BGPFilterReject}},
		ExportV6: []v1.BGPFilterRuleV6{{CIDR: "fd00:10:244::/48", MatchOperator: v1.BGPFilterNotIn, Action: v1.BGPFilterReject}},
	}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := model.BGPFilter{Name: "f",
		Import: []model.FilterRule{
			{Family: ipfamily.IPv4, Accept: true, Prefix: netip.MustParsePrefix("10.0.0.0/8"), MinLen: 16, MaxLen: 24},
			{Family: ipfamily.IPv4},
			{Family: ipfamily.IPv6, Prefix: netip.MustParsePrefix("2001:db8::/32"), MinLen: 32, MaxLen: 32, Negate: true},
		},
		Export: []model.FilterRule{
			{Family: ipfamily.IPv4, Prefix: netip.MustParsePrefix("10.244.1.0/26"), MinLen: 26, MaxLen: 26, RemotePeers: true},
			{Family: ipfamily.IPv6, Prefix: netip.MustParsePrefix("fd00:10:244::/48"), MinLen: 48, MaxLen: 128, Negate: true},
		}}
	if !f.Equal(want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", f, want)
	}
}

// TestParsePrefixAdvertisements: names resolve to their values, literals are kept, standard and
// large communities are told apart.
func TestParsePrefixAdvertisements(t *testing.T) {
	c := communityConfig([]v1.Community{{Name: "rack", Value: "65001:0100"}, {Name: "big", Value: "4200000000:1:2"}},
		v1.PrefixAdvertisement{CIDR: "10.244.0.0/16", Communities: []v1.CommunityRef{"rack", "65001:200", "big"}})
	got, errs := ParsePrefixAdvertisements(c)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []model.PrefixCommunities{{Prefix: netip.MustParsePrefix("10.244.0.0/16"), Standard: []string{"65001:100", "65001:200"}, Large: []string{"4200000000:1:2"}}}
	if !slices.EqualFunc(got, want, model.PrefixCommunities.Equal) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	c.Spec.PrefixAdvertisements[0].Communities = []v1.CommunityRef{"nosuch"}
	if _, errs := ParsePrefixAdvertisements(c); len(errs) != 1 || errs[0].Field != "spec.prefixAdvertisements[0].communities[0]" || errs[0].BadValue != "nosuch" {
		t.Fatalf("unknown name: %v", errs)
	}
}
