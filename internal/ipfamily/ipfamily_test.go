package ipfamily

import (
	"net/netip"
	"testing"
)

func TestFamily(t *testing.T) {
	for _, c := range []struct {
		addr string
		want Family
		host string
	}{
		{"10.244.0.1", IPv4, "10.244.0.1/32"},
		{"::ffff:10.244.0.1", IPv4, "10.244.0.1/32"},
		{"fd00:10:244::1", IPv6, "fd00:10:244::1/128"},
	} {
		a := netip.MustParseAddr(c.addr)
		if got := OfAddr(a); got != c.want {
			t.Errorf("OfAddr(%s) = %s, want %s", c.addr, got, c.want)
		}
		if got := HostPrefix(a).String(); got != c.host {
			t.Errorf("HostPrefix(%s) = %s, want %s", c.addr, got, c.host)
		}
	}
	if OfAddr(netip.Addr{}) != Unknown {
		t.Error("an invalid address has a family")
	}
	if IPv6.IPSetFamily() != "inet6" || IPv4.IPTablesCommand() != "iptables" || IPv6.IPTablesCommand() != "ip6tables" {
		t.Error("per-family commands wrong")
	}
	if IPv4.NameSuffix() != "" || IPv6.NameSuffix() != "-v6" {
		t.Error("name suffixes wrong: IPv4 names must stay as they were")
	}
	ps := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("192.0.2.0/24")}
	if got := Split(ps, IPv4); len(got) != 2 || got[1].String() != "192.0.2.0/24" {
		t.Errorf("Split IPv4 = %v", got)
	}
}
