package cluster

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestLostFields(t *testing.T) {
	decode := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := decode(`{"ippools/a": {"cidr": "10.244.0.0/16", "blockSize": 26, "nat": {"outgoing": true}},
		"bgpfilters/f": {"importV4": [{"action": "Accept"}]}, "bgppeers/p": {"asNumber": 1}}`)
	after := decode(`{"ippools/a": {"cidr": "10.244.0.0/16", "nat": {"outgoing": false}, "vxlanMode": "Never"},
		"bgpfilters/f": {"importV4": [{"action": "Accept"}, {"action": "Reject"}]}}`)
	got := LostFields(before, after)
	want := []string{
		`bgpfilters/f spec.importV4: [{"action":"Accept"},{"action":"Reject"}], was [{"action":"Accept"}]`,
		"bgppeers/p: gone",
		"ippools/a spec.blockSize: missing",
		"ippools/a spec.nat.outgoing: false, was true",
	}
	if !slices.Equal(got, want) {
		t.Errorf("LostFields:\n got %q\nwant %q", got, want)
	}
	if got := LostFields(before, before); len(got) != 0 {
		t.Errorf("LostFields of the same: %q", got)
	}
}
