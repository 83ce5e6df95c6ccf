package ipammetrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/node/ipammetrics"
)

func TestPoolUse(t *testing.T) {
	pools := []v1.IPPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "default-ipv4"}, Spec: v1.IPPoolSpec{CIDR: "10.244.0.0/24", BlockSize: 26}},
		{ObjectMeta: metav1.ObjectMeta{Name: "default-ipv6"}, Spec: v1.IPPoolSpec{CIDR: "fd00:10:244::/48", BlockSize: 122}},
		// Services' addresses, not pods': lbipam's metrics.
		{ObjectMeta: metav1.ObjectMeta{Name: "public"}, Spec: v1.IPPoolSpec{CIDR: "203.0.113.240/28", AllowedUses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}},
	}
	allocs := func(n int) map[string]v1.Allocation {
		m := map[string]v1.Allocation{}
		for i := range n {
			m[string(rune('0'+i))] = v1.Allocation{}
		}
		return m
	}
	blocks := []v1.IPAMBlock{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.IPAMBlockSpec{CIDR: "10.244.0.0/26", Affinity: "host:node-1", Allocations: allocs(3)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1.IPAMBlockSpec{CIDR: "10.244.0.64/26", Affinity: "host:node-2", Allocations: allocs(2)}},
	}
	synced := true
	reg := prometheus.NewRegistry()
	ipammetrics.Register(reg, ipammetrics.Lists{
		Pools:  func() ([]v1.IPPool, bool) { return pools, synced },
		Blocks: func() ([]v1.IPAMBlock, bool) { return blocks, synced },
	})
	want := `
# HELP tabby_ipam_pool_addresses Addresses in the IPPool (an IPv6 pool's count is rounded).
# TYPE tabby_ipam_pool_addresses gauge
tabby_ipam_pool_addresses{cidr="10.244.0.0/24",pool="default-ipv4"} 256
tabby_ipam_pool_addresses{cidr="fd00:10:244::/48",pool="default-ipv6"} 1.2089258196146292e+24
# HELP tabby_ipam_pool_addresses_in_use Addresses of the IPPool allocated to pods (and tunnel addresses), across all nodes.
# TYPE tabby_ipam_pool_addresses_in_use gauge
tabby_ipam_pool_addresses_in_use{cidr="10.244.0.0/24",pool="default-ipv4"} 5
tabby_ipam_pool_addresses_in_use{cidr="fd00:10:244::/48",pool="default-ipv6"} 0
# HELP tabby_ipam_pool_blocks Blocks of the IPPool claimed by nodes.
# TYPE tabby_ipam_pool_blocks gauge
tabby_ipam_pool_blocks{cidr="10.244.0.0/24",pool="default-ipv4"} 2
tabby_ipam_pool_blocks{cidr="fd00:10:244::/48",pool="default-ipv6"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tabby_ipam_pool_addresses", "tabby_ipam_pool_addresses_in_use", "tabby_ipam_pool_blocks"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "tabby_ipam_pool_blocks_max"); err != nil || n != 2 {
		t.Fatalf("blocks_max series %d, %v", n, err)
	}

	// Until the informers have synced, nothing: a half-listed cluster would read as a pool
	// emptied.
	synced = false
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d series before the informers synced (%v), want none", n, err)
	}
}
