package syncer

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/felix/policy"
)

// PodAddr is one address of one pod.
type PodAddr = policy.PodAddr

// PodIPsChange is how the pods' addresses changed between two snapshots: the addresses that
// went and the ones that came, block by block. A pod churning on one node of a thousand is one
// address out and one in, not a new map of every pod in the cluster, and the syncer keeps no
// index of its own by pod: felix's is the only one.
type PodIPsChange struct {
	Removed, Added []PodAddr
}

// blockChange is a block whose contribution changed: old or cur is nil when it came or went.
type blockChange struct {
	name     string
	old, cur []PodAddr
}

// diffPodIPs turns the blocks' changes into the addresses that went and came. An address that
// stayed in its block (its block changed for another allocation) is in neither.
func diffPodIPs(changes []blockChange) *PodIPsChange {
	out := &PodIPsChange{}
	for _, ch := range changes {
		old := make(map[PodAddr]bool, len(ch.old))
		for _, a := range ch.old {
			old[a] = true
		}
		for _, a := range ch.cur {
			if old[a] {
				delete(old, a)
				continue
			}
			out.Added = append(out.Added, a)
		}
		for _, a := range ch.old {
			if old[a] {
				out.Removed = append(out.Removed, a)
			}
		}
	}
	return out
}

// podIPs is every pod's addresses, sorted, in a new map: the first snapshot's, from the blocks
// the cache holds.
func (c *viewCache) podIPs() map[PodKey][]netip.Addr {
	out := map[PodKey][]netip.Addr{}
	for _, e := range c.blocks {
		for _, a := range e.view.podIPs {
			out[a.Pod] = append(out[a.Pod], a.IP)
		}
	}
	for _, ips := range out {
		if len(ips) > 1 {
			slices.SortFunc(ips, netip.Addr.Compare)
		}
	}
	return out
}
