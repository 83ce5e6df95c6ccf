package syncer

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/felix/policy"
)

// PodAddr is one address of one pod.
type PodAddr = policy.PodAddr

// PodIPsChange is how the pods' addresses changed between two passes: the addresses that went
// and the ones that came, block by block. A pod churning on one node of a thousand is one
// address out and one in, not a new map of every pod in the cluster, and the syncer keeps no
// index of its own by pod: felix's is the only one.
type PodIPsChange struct {
	Removed, Added []PodAddr
}

// diffPodIPs turns the blocks' changes into the addresses that went and came. An address that
// stayed in its block (its block changed for another allocation) is in neither.
func diffPodIPs(changes []blockChange) *PodIPsChange {
	out := &PodIPsChange{}
	for _, ch := range changes {
		var old, cur []PodAddr
		if ch.old != nil {
			old = ch.old.podIPs
		}
		if ch.cur != nil {
			cur = ch.cur.podIPs
		}
		was := make(map[PodAddr]bool, len(old))
		for _, a := range old {
			was[a] = true
		}
		for _, a := range cur {
			if was[a] {
				delete(was, a)
				continue
			}
			out.Added = append(out.Added, a)
		}
		for _, a := range old {
			if was[a] {
				out.Removed = append(out.Removed, a)
			}
		}
	}
	return out
}

// empty: no address went or came.
func (c *PodIPsChange) empty() bool { return len(c.Removed) == 0 && len(c.Added) == 0 }

// podIPs is every pod's addresses, sorted, in a new map: the first pass's, from the blocks the
// cache holds.
func (c *viewCache) podIPs() map[PodKey][]netip.Addr {
	out := map[PodKey][]netip.Addr{}
	for v := range c.views {
		for _, a := range v.podIPs {
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
