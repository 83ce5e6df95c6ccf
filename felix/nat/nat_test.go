package nat

import (
	"net/netip"
	"testing"
)

func TestRestoreScript(t *testing.T) {
	got := RestoreScript(map[string][]netip.Prefix{
		MasqPoolsSet: {netip.MustParsePrefix("10.244.0.0/16")},
		AllPoolsSet:  {netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.245.0.0/16")},
	})
	want := `create tabby-all-ipam-pools hash:net family inet -exist
create tabby-all-ipam-pools-tmp hash:net family inet -exist
flush tabby-all-ipam-pools-tmp
add tabby-all-ipam-pools-tmp 10.244.0.0/16
add tabby-all-ipam-pools-tmp 10.245.0.0/16
swap tabby-all-ipam-pools-tmp tabby-all-ipam-pools
destroy tabby-all-ipam-pools-tmp
create tabby-masq-ipam-pools hash:net family inet -exist
create tabby-masq-ipam-pools-tmp hash:net family inet -exist
flush tabby-masq-ipam-pools-tmp
add tabby-masq-ipam-pools-tmp 10.244.0.0/16
swap tabby-masq-ipam-pools-tmp tabby-masq-ipam-pools
destroy tabby-masq-ipam-pools-tmp
`
	if got != want {
		t.Fatalf("script:\n%s\nwant:\n%s", got, want)
	}
}
