package node

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

func TestObserveConfig(t *testing.T) {
	base := Config{NodeName: "a", RunDir: "/run"}
	for _, tc := range []struct {
		addr, adv, cert string
		want            string
	}{
		{":9095", "", "", "needs --observe-tls-cert-file"},
		{"9095", "", "/c", `--observe-addr="9095": want HOST:PORT`},
		{":0", "", "/c", `port "0"`},
		{":9095", "node-1", "/c", `--observe-advertise-addr="node-1"`},
		{"", "198.51.100.11:9095", "", "without --observe-addr"},
	} {
		c := base
		c.ObserveAddr, c.ObserveAdvertise, c.ObserveCertFile, c.ObserveKeyFile = tc.addr, tc.adv, tc.cert, tc.cert
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc, err, tc.want)
		}
	}
	addrs := ipfamily.PairOf(netip.MustParsePrefix("198.51.100.11/24"), netip.MustParsePrefix("2001:db8::11/64"))
	v6only := ipfamily.PairOf(netip.Prefix{}, netip.MustParsePrefix("2001:db8::11/64"))
	for _, tc := range []struct {
		addr, adv string
		addrs     ipfamily.Pair[netip.Prefix]
		want      string
	}{
		{"", "", addrs, ""},
		{":9095", "", addrs, "198.51.100.11:9095"},
		{"0.0.0.0:9095", "", addrs, "198.51.100.11:9095"},
		{"[::]:9095", "", v6only, "[2001:db8::11]:9095"},
		{"127.0.0.1:9095", "", addrs, "127.0.0.1:9095"},
		{":9095", "127.0.0.1:40001", addrs, "127.0.0.1:40001"},
	} {
		c := base
		c.ObserveAddr, c.ObserveAdvertise, c.ObserveCertFile, c.ObserveKeyFile = tc.addr, tc.adv, "/c", "/k"
		if c.ObserveAddr != "" {
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.observeAdvertised(tc.addrs); got != tc.want {
			t.Errorf("%s advertised %s: %q, want %q", tc.addr, tc.adv, got, tc.want)
		}
	}
}
