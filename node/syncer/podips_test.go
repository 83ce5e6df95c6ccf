package syncer

import (
	"net/netip"
	"reflect"
	"testing"
)

// A block that changed for one allocation hands out that allocation, not the block's others.
func TestDiffPodIPs(t *testing.T) {
	addr := func(pod, ip string) PodAddr {
		return PodAddr{Pod: PodKey{Namespace: "ns", Name: pod}, IP: netip.MustParseAddr(ip)}
	}
	stays, goes, comes := addr("a", "10.244.0.1"), addr("b", "10.244.0.2"), addr("c", "10.244.0.3")
	gone := addr("d", "10.244.1.1")
	got := diffPodIPs([]blockChange{
		{name: "b0", old: &blockView{podIPs: []PodAddr{stays, goes}}, cur: &blockView{podIPs: []PodAddr{comes, stays}}},
		{name: "b1", old: &blockView{podIPs: []PodAddr{gone}}}, // deleted
	})
	want := &PodIPsChange{Removed: []PodAddr{goes, gone}, Added: []PodAddr{comes}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff %+v, want %+v", got, want)
	}
}
