// Package ipammetrics exports the use of every IPPool as tabby-node's metrics, read from the
// node's informers at scrape time: the figures `tabbyctl ipam show` prints, for dashboards and
// for the alert on a pool running out.
package ipammetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/ipam"
)

// Lists return the pools and blocks as held, and whether they are complete (the informers have
// synced); nothing is exported before they are.
type Lists struct {
	Pools  func() ([]v1.IPPool, bool)
	Blocks func() ([]v1.IPAMBlock, bool)
}

type collector struct {
	lists          Lists
	total, inUse   *prometheus.Desc
	blocks, maxBlk *prometheus.Desc
}

// Register adds the pools' use to reg. Every node exports the same cluster-wide figures: a query
// takes one node's (max by pool).
func Register(reg prometheus.Registerer, l Lists) {
	labels := []string{"pool", "cidr"}
	reg.MustRegister(&collector{
		lists: l,
		total: prometheus.NewDesc("tabby_ipam_pool_addresses",
			"Addresses in the IPPool (an IPv6 pool's count is rounded).", labels, nil),
		inUse: prometheus.NewDesc("tabby_ipam_pool_addresses_in_use",
			"Addresses of the IPPool allocated to pods (and tunnel addresses), across all nodes.", labels, nil),
		blocks: prometheus.NewDesc("tabby_ipam_pool_blocks",
			"Blocks of the IPPool claimed by nodes.", labels, nil),
		maxBlk: prometheus.NewDesc("tabby_ipam_pool_blocks_max",
			"Blocks the IPPool can hold (rounded for an IPv6 pool): a pool whose blocks are all claimed has nodes borrow addresses.", labels, nil),
	})
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.inUse
	ch <- c.blocks
	ch <- c.maxBlk
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	all, ok := c.lists.Pools()
	if !ok {
		return
	}
	// A LoadBalancer pool's addresses are Services', not blocks': lbipam's metrics count them.
	pools := make([]v1.IPPool, 0, len(all))
	for i := range all {
		if p, errs := validation.ParseIPPool(&all[i]); len(errs) == 0 && !p.LoadBalancer() {
			pools = append(pools, all[i])
		}
	}
	blocks, ok := c.lists.Blocks()
	if !ok {
		return
	}
	for _, p := range ipam.UsageOf(pools, blocks).Pools {
		lv := []string{p.Name, p.CIDR.String()}
		total, _ := p.Total.Float64()
		maxBlocks, _ := p.MaxBlocks.Float64()
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, total, lv...)
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(p.InUse), lv...)
		ch <- prometheus.MustNewConstMetric(c.blocks, prometheus.GaugeValue, float64(p.Blocks), lv...)
		ch <- prometheus.MustNewConstMetric(c.maxBlk, prometheus.GaugeValue, maxBlocks, lv...)
	}
}
