package speaker

import (
	"net/netip"
	"slices"
	"testing"
)

func TestPrefixDiff(t *testing.T) {
	pp := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, c := range []struct {
		from, to, add, del []netip.Prefix
	}{
		{from: nil, to: nil},
		{from: pp("10.244.1.0/26"), to: pp("10.244.1.0/26")},
		{from: pp("10.244.1.0/26", "10.244.2.0/26"), to: pp("10.244.2.0/26", "10.244.3.0/26"), add: pp("10.244.3.0/26"), del: pp("10.244.1.0/26")},
		{from: pp("255.255.255.255/32"), to: pp("10.244.1.0/26"), add: pp("10.244.1.0/26"), del: pp("255.255.255.255/32")},
		// Listed twice, sent once.
		{from: pp("10.244.1.0/26", "10.244.1.0/26"), to: pp("10.244.2.0/26", "10.244.2.0/26"), add: pp("10.244.2.0/26"), del: pp("10.244.1.0/26")},
	} {
		add, del := prefixDiff(c.from, c.to)
		if !slices.Equal(add, c.add) || !slices.Equal(del, c.del) {
			t.Errorf("prefixDiff(%v, %v) = add %v del %v, want add %v del %v", c.from, c.to, add, del, c.add, c.del)
		}
	}
}
