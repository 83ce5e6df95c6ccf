package ipam

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func TestOrdinalMath(t *testing.T) {
	type ordCase struct {
		ip  string
		ord int
		ok  bool
	}
	for _, blk := range []struct {
		block string
		cases []ordCase
	}{
		{"10.244.1.64/26", []ordCase{{"10.244.1.64", 0, true}, {"10.244.1.127", 63, true}, {"10.244.1.128", 0, false}, {"10.244.1.63", 0, false}}},
		{"fd00:10:244::1:40/122", []ordCase{{"fd00:10:244::1:40", 0, true}, {"fd00:10:244::1:7f", 63, true}, {"fd00:10:244::1:80", 0, false}, {"10.244.1.64", 0, false}}},
	} {
		b := netip.MustParsePrefix(blk.block)
		if blockLen(b) != 64 {
			t.Fatalf("blockLen(%s) = %d", b, blockLen(b))
		}
		for _, tc := range blk.cases {
			o, ok := ordinalOf(b, netip.MustParseAddr(tc.ip))
			if o != tc.ord || ok != tc.ok {
				t.Errorf("ordinalOf(%s, %s) = %d,%v want %d,%v", b, tc.ip, o, ok, tc.ord, tc.ok)
			}
			if ok && addrAt(b, o).String() != tc.ip {
				t.Errorf("addrAt(%s, %d) = %s want %s", b, o, addrAt(b, o), tc.ip)
			}
		}
		if got := blockContaining(addrAt(b, 36), b.Bits()); got != b {
			t.Fatalf("blockContaining = %s, want %s", got, b)
		}
	}
	// The largest block: an ordinal crosses a byte boundary without carrying past the block.
	big := netip.MustParsePrefix("fd00:10:244::f000/116")
	if blockLen(big) != 4096 || addrAt(big, 4095).String() != "fd00:10:244::ffff" || addrAt(big, 256).String() != "fd00:10:244::f100" {
		t.Fatalf("/116: len %d, last %s", blockLen(big), addrAt(big, 4095))
	}
	if o, ok := ordinalOf(big, netip.MustParseAddr("fd00:10:244::f1ff")); !ok || o != 511 {
		t.Fatalf("ordinalOf in a /116 = %d %v", o, ok)
	}
	for s, ok := range map[string]bool{"fd00:10:244::f000/116": true, "fd00:10:244::/115": false, "10.244.0.0/20": true, "10.244.0.0/19": false, "fd00:10:244::1/122": false} {
		if _, err := parseStoredCIDR(s); (err == nil) != ok {
			t.Errorf("parseStoredCIDR(%s) = %v, want ok=%v", s, err, ok)
		}
	}
}

func TestFreeOrdinalWrapsFromCursor(t *testing.T) {
	c := netip.MustParsePrefix("10.244.0.0/30")
	b := &v1.IPAMBlock{Spec: v1.IPAMBlockSpec{Allocations: map[string]v1.Allocation{"0": {}, "2": {}}}}
	if o, ok := freeOrdinal(c, b, 2); !ok || o != 3 {
		t.Fatalf("from 2: %d %v", o, ok)
	}
	if o, ok := freeOrdinal(c, b, 0); !ok || o != 1 {
		t.Fatalf("from 0: %d %v", o, ok)
	}
	b.Spec.Allocations["1"], b.Spec.Allocations["3"] = v1.Allocation{}, v1.Allocation{}
	if _, ok := freeOrdinal(c, b, 0); ok {
		t.Fatalf("a full block has no free ordinal")
	}
}

func TestSelectPools(t *testing.T) {
	mk := func(name, cidr, sel string, disabled bool) v1.IPPool {
		p := v1.IPPool{Spec: v1.IPPoolSpec{CIDR: cidr, BlockSize: 26, NodeSelector: sel, Disabled: disabled}}
		p.Name = name
		return p
	}
	mk6 := func(name, cidr string) v1.IPPool {
		p := v1.IPPool{Spec: v1.IPPoolSpec{CIDR: cidr}}
		p.Name = name
		return p
	}
	all, bad := parsePools([]v1.IPPool{
		mk("a", "10.244.0.0/24", "zone == 'a'", false),
		mk("b", "10.244.1.0/24", "zone == 'b'", false),
		mk("off", "10.244.2.0/24", "", true),
		mk("any", "10.244.3.0/24", "", false),
	})
	names := func(ps []model.Pool) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.Name)
		}
		return strings.Join(s, ",")
	}
	got, err := selectPools(all, bad, ipfamily.IPv4, "n1", map[string]string{"zone": "a"}, nil, "")
	if err != nil || names(got) != "a,any" {
		t.Fatalf("by selector: %s %v", names(got), err)
	}
	got, err = selectPools(all, bad, ipfamily.IPv4, "n1", map[string]string{"zone": "a"}, []string{"10.244.3.0/24"}, "x")
	if err != nil || names(got) != "any" {
		t.Fatalf("explicit CIDR: %s %v", names(got), err)
	}
	_, err = selectPools(all, bad, ipfamily.IPv4, "n1", map[string]string{"zone": "a"}, []string{"b", "off", "nope"}, "pod ns/p annotation")
	if err == nil || !strings.Contains(err.Error(), "b (nodeSelector \"zone == 'b'\" does not match)") || !strings.Contains(err.Error(), "off (disabled)") || !strings.Contains(err.Error(), "nope (no such IPPool)") || !strings.Contains(err.Error(), "pod ns/p annotation") {
		t.Fatalf("explicit unusable pools: %v", err)
	}
	onlyA, _ := parsePools([]v1.IPPool{mk("a", "10.244.0.0/24", "zone == 'a'", false), mk("off", "10.244.2.0/24", "", true)})
	_, err = selectPools(onlyA, nil, ipfamily.IPv4, "n2", map[string]string{"zone": "c"}, nil, "")
	if err == nil || !strings.Contains(err.Error(), "no IPPool matches node n2 (pools: a (nodeSelector \"zone == 'a'\" does not match), off (disabled))") {
		t.Fatalf("no pool: %v", err)
	}
	_, err = selectPools(nil, nil, ipfamily.IPv4, "n2", nil, nil, "")
	if err == nil || !strings.Contains(err.Error(), "there are no IPPools") {
		t.Fatalf("no pools at all: %v", err)
	}

	// A request is for one family: the other family's pools are not candidates, and say why
	// when nothing else is.
	dual, bad := parsePools([]v1.IPPool{mk("any", "10.244.3.0/24", "", false), mk6("v6", "fd00:10:244::/48")})
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	got, err = selectPools(dual, nil, ipfamily.IPv4, "n1", nil, nil, "")
	if err != nil || names(got) != "any" {
		t.Fatalf("IPv4 request, dual stack: %s %v", names(got), err)
	}
	got, err = selectPools(dual, nil, ipfamily.IPv6, "n1", nil, nil, "")
	if err != nil || names(got) != "v6" || got[0].BlockSize != 122 {
		t.Fatalf("IPv6 request, dual stack: %s %v", names(got), err)
	}
	_, err = selectPools(dual, nil, ipfamily.IPv4, "n1", nil, []string{"v6"}, "the request")
	if err == nil || !strings.Contains(err.Error(), "v6 (an IPv6 pool: the request is for IPv4)") {
		t.Fatalf("explicit pool of the other family: %v", err)
	}
	only6, _ := parsePools([]v1.IPPool{mk6("v6", "fd00:10:244::/48")})
	_, err = selectPools(only6, nil, ipfamily.IPv4, "n1", nil, nil, "")
	if err == nil || !strings.Contains(err.Error(), "no IPPool matches node n1 (pools: v6 (an IPv6 pool: the request is for IPv4))") {
		t.Fatalf("only an IPv6 pool, IPv4 request: %v", err)
	}
}
