package syncer

import (
	"net/netip"
	"slices"
)

// podIndex is every pod's addresses, cluster-wide, kept up to date block by block: a pod
// churning on one node of a thousand changes one block, and the agents are handed that pod's
// addresses, not a new map of every pod in the cluster.
type podIndex struct {
	byPod map[PodKey][]podAddr
}

// podAddr is one address of a pod and the block it is in.
type podAddr struct {
	block string
	ip    netip.Addr
}

// blockChange is a block whose contribution changed: old or cur is nil when it came or went.
type blockChange struct {
	name     string
	old, cur []podIP
}

func newPodIndex() *podIndex { return &podIndex{byPod: map[PodKey][]podAddr{}} }

// apply takes the blocks' changes in and returns the pods whose addresses changed, each with
// all its addresses now (none: it has none left).
func (x *podIndex) apply(changes []blockChange) map[PodKey][]netip.Addr {
	out := map[PodKey][]netip.Addr{}
	for _, ch := range changes {
		for _, p := range ch.old {
			x.byPod[p.pod] = slices.DeleteFunc(x.byPod[p.pod], func(a podAddr) bool { return a.block == ch.name })
			out[p.pod] = nil
		}
		for _, p := range ch.cur {
			x.byPod[p.pod] = append(x.byPod[p.pod], podAddr{block: ch.name, ip: p.ip})
			out[p.pod] = nil
		}
	}
	for k := range out {
		ips := x.ips(k)
		if len(ips) == 0 {
			delete(x.byPod, k)
		}
		out[k] = ips
	}
	return out
}

// ips is the pod's addresses, sorted.
func (x *podIndex) ips(k PodKey) []netip.Addr {
	as := x.byPod[k]
	if len(as) == 0 {
		return nil
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		out = append(out, a.ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// all is every pod's addresses, in a new map.
func (x *podIndex) all() map[PodKey][]netip.Addr {
	out := make(map[PodKey][]netip.Addr, len(x.byPod))
	for k := range x.byPod {
		out[k] = x.ips(k)
	}
	return out
}
