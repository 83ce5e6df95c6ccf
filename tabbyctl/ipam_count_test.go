package tabbyctl

import (
	"math/big"
	"testing"
)

// An IPv6 pool's size reads as a power of two, exactly; an IPv4 one in digits.
func TestAddressCount(t *testing.T) {
	pow := func(k uint) *big.Int { return new(big.Int).Lsh(big.NewInt(1), k) }
	sub := func(a *big.Int, b int64) *big.Int { return new(big.Int).Sub(a, big.NewInt(b)) }
	for _, c := range []struct {
		n    *big.Int
		want string
	}{
		{big.NewInt(0), "0"},
		{big.NewInt(65530), "65530"},
		{sub(pow(32), 1), "4294967295"},
		{pow(32), "2^32"},
		{pow(80), "2^80"},
		{sub(pow(80), 6), "2^80-6"},
		{sub(pow(128), 1), "2^128-1"},
		{new(big.Int).Add(pow(80), pow(79)), "1.813e+24"},
	} {
		if got := addressCount(c.n); got != c.want {
			t.Errorf("addressCount(%s) = %q, want %q", c.n, got, c.want)
		}
	}
}
