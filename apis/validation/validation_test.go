package validation

import (
	"net/netip"
	"strings"
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func TestCases(t *testing.T) {
	for _, tc := range Cases {
		err := Object(tc.Obj)
		switch {
		case tc.Field == "" && err != nil:
			t.Errorf("%s: want valid, got %v", tc.Name, err)
		case tc.Field != "" && err == nil:
			t.Errorf("%s: want an error naming %q, got none", tc.Name, tc.Field)
		case tc.Field != "" && !strings.Contains(err.Error(), tc.Field):
			t.Errorf("%s: error %q does not name %q", tc.Name, err, tc.Field)
		}
	}
}

func TestParsePeerIP(t *testing.T) {
	a, port, err := ParsePeerIP("198.51.100.7:1179")
	if err != nil || a.String() != "198.51.100.7" || port != 1179 {
		t.Fatalf("ParsePeerIP = %v %d %v", a, port, err)
	}
	if _, port, _ := ParsePeerIP("198.51.100.7"); port != 179 {
		t.Fatalf("default port = %d, want 179", port)
	}
}

// TestParseIPPool: the typed pool carries the prefix, its family and the defaults IPAM applies,
// so nothing past the edge reads spec again.
func TestParseIPPool(t *testing.T) {
	p, errs := ParseIPPool(pool("p", "10.244.0.0/16", 0, ""))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if p.Name != "p" || p.CIDR != netip.MustParsePrefix("10.244.0.0/16") || p.Family() != ipfamily.IPv4 ||
		p.BlockSize != v1.DefaultBlockSizeIPv4 || p.IPIPMode != v1.IPIPModeNever || p.IPIP() || !p.Matches(nil) {
		t.Fatalf("parsed pool: %+v", p)
	}
	sel := pool("sel", "10.244.0.0/16", 28, v1.IPIPModeCrossSubnet)
	sel.Spec.NodeSelector = "zone == 'a'"
	p, errs = ParseIPPool(sel)
	if len(errs) > 0 || p.BlockSize != 28 || !p.IPIP() || !p.Matches(map[string]string{"zone": "a"}) || p.Matches(map[string]string{"zone": "b"}) {
		t.Fatalf("parsed pool: %+v %v", p, errs)
	}
	bad := pool("bad", "10.244.0.0/16", 26, "")
	bad.Spec.NodeSelector = "zone =="
	if _, errs := ParseIPPool(bad); len(errs) != 1 || errs[0].Field != "spec.nodeSelector" {
		t.Fatalf("bad selector: %v", errs)
	}
}

func TestParseCIDR(t *testing.T) {
	for s, ok := range map[string]bool{
		"10.244.0.0/16": true, "fd00:10:244::/48": true, "10.244.0.1/16": false, "fd00::1/64": false,
		"::ffff:10.244.0.0/112": false, "10.244.0.0": false, "": false,
	} {
		if _, err := ParseCIDR(s); (err == nil) != ok {
			t.Errorf("ParseCIDR(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}
