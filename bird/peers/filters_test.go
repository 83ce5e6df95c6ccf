package peers

import (
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// TestFilters: a session carries its BGPPeer's filters in order; one that names a BGPFilter
// that does not exist (or is invalid) is not opened and says which, so that nothing the filter
// was written to stop is ever sent or taken. A mesh session has none.
func TestFilters(t *testing.T) {
	bgpPeers := []v1.BGPPeer{
		peer("tor", v1.BGPPeerSpec{PeerIP: "203.0.113.1", ASNumber: 65000, Filters: []string{"in", "out"}}),
		peer("tor2", v1.BGPPeerSpec{PeerIP: "203.0.113.2", ASNumber: 65000, Filters: []string{"in", "nosuch"}}),
	}
	res, err := Compute(Input{LocalNode: "n1", Nodes: []model.Node{n1, n2}, Peers: bgpPeers, Filters: map[string]struct{}{"in": {}, "out": {}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Peer{}
	for _, p := range res.Peers {
		got[p.Address.String()] = p
	}
	if p := got["203.0.113.1"]; p.Filters != "in,out" || p.Err != "" {
		t.Errorf("tor: filters %q err %q, want in,out and no error", p.Filters, p.Err)
	}
	if p := got["203.0.113.2"]; p.Filters != "in,nosuch" || !strings.Contains(p.Err, `bgppeer/tor2: BGPFilter "nosuch" does not exist`) {
		t.Errorf("tor2: filters %q err %q, want the missing filter named", p.Filters, p.Err)
	}
	if p := got["198.51.100.2"]; p.Filters != "" || p.Err != "" {
		t.Errorf("mesh session: filters %q err %q", p.Filters, p.Err)
	}
}
