package ipam_test

import (
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/ipam"
)

func TestOrdinal(t *testing.T) {
	b := netip.MustParsePrefix("10.244.1.192/26")
	for o := range 64 {
		ip := ipam.AddrAt(b, o)
		if got, ok := ipam.OrdinalOf(b, ip); !ok || got != o {
			t.Fatalf("OrdinalOf(AddrAt(%d)=%s) = %d,%v", o, ip, got, ok)
		}
	}
	if ip := ipam.AddrAt(b, 63); ip.String() != "10.244.1.255" {
		t.Errorf("AddrAt(63) = %s", ip)
	}
	for _, s := range []string{"10.244.2.0", "10.244.1.191", "::1"} {
		if _, ok := ipam.OrdinalOf(b, netip.MustParseAddr(s)); ok {
			t.Errorf("OrdinalOf(%s) must be false", s)
		}
	}
}
