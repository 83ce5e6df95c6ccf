package bird

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

func (d dirtySet) String() string {
	var out []string
	for _, c := range []struct {
		bit  dirtySet
		name string
	}{{dirtySessions, "sessions"}, {dirtySpeaker, "speaker"}, {dirtyPaths, "paths"}, {dirtyPolicy, "policy"}, {dirtyNeighbors, "neighbors"}, {dirtyRoutes, "routes"}} {
		if d&c.bit != 0 {
			out = append(out, c.name)
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, "+")
}

// TestRecordMarksOnlyWhatAMessageChanges: each message marks the concerns it can change and no
// other; a message that changes nothing marks nothing (and so wakes no pass).
func TestRecordMarksOnlyWhatAMessageChanges(t *testing.T) {
	self := mkNode(1, map[string]string{"rack": "a"}, "")
	other := mkNode(2, nil, "")
	mine, elsewhere := blockOf(1), blockOf(2)
	borrowed := model.BlockUpdate{Block: model.Block{CIDR: elsewhere, Node: other.Name,
		Borrowed: []model.Borrowed{{Addr: netip.MustParseAddr("10.244.2.9"), Node: self.Name}}}}
	borrowedByOther := model.BlockUpdate{Block: model.Block{CIDR: elsewhere, Node: other.Name,
		Borrowed: []model.Borrowed{{Addr: netip.MustParseAddr("10.244.2.9"), Node: "node3"}}}}
	tor := v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: "198.51.100.250", ASNumber: 65000}}
	torPw := tor
	torPw.Spec.Password = &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "bgp", Key: "pw"}}
	svc := &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{ServiceClusterIPs: []v1.ServiceCIDR{{CIDR: "203.0.113.0/26"}}}}
	debug := &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{ServiceClusterIPs: []v1.ServiceCIDR{{CIDR: "203.0.113.0/26"}}, LogSeverity: "Debug"}}
	maxPaths1 := svc.DeepCopy()
	maxPaths1.Spec.MaxPaths = new(int32)
	*maxPaths1.Spec.MaxPaths = 1
	change := func(n model.Node, f func(*model.Node)) model.Node { f(&n); return n }

	for _, c := range []struct {
		name          string
		before        []any // recorded first
		msg           any
		explainedUsed bool
		want          dirtySet
	}{
		{"a node joins", nil, model.NodeUpdate{Node: other}, false, dirtySessions},
		{"the same node again", []any{model.NodeUpdate{Node: other}}, model.NodeUpdate{Node: other}, false, 0},
		{"a node's labels", []any{model.NodeUpdate{Node: self}}, model.NodeUpdate{Node: change(self, func(n *model.Node) { n.Labels = nil })}, false, dirtySessions},
		{"a node's restart mark", []any{model.NodeUpdate{Node: other}}, model.NodeUpdate{Node: change(other, func(n *model.Node) { n.RestartingUntil = time.Now() })}, false, dirtyNeighbors},
		{"a node's tunnel address", []any{model.NodeUpdate{Node: other}}, model.NodeUpdate{Node: change(other, func(n *model.Node) { n.IPIPTunnelAddr = netip.MustParseAddr("10.244.2.1") })}, false, 0},
		{"a node leaves", []any{model.NodeUpdate{Node: other}}, model.NodeRemove{Name: other.Name}, false, dirtySessions},
		{"an unknown node leaves", nil, model.NodeRemove{Name: other.Name}, false, 0},

		{"a pool", nil, poolUpdate(pool), false, dirtyPolicy | dirtyRoutes},
		{"the same pool again", []any{poolUpdate(pool)}, poolUpdate(pool), false, 0},
		{"a second pool with the same CIDR", []any{poolUpdate(pool)}, model.PoolUpdate{Pool: model.Pool{Name: "twin", CIDR: pool}}, false, 0},
		{"a pool removed", []any{poolUpdate(pool)}, model.PoolRemove{Name: poolUpdate(pool).Pool.Name}, false, dirtyPolicy | dirtyRoutes},

		{"a block of this node", nil, claim(mine, self.Name), false, dirtyPaths | dirtyPolicy},
		{"the same block again", []any{claim(mine, self.Name)}, claim(mine, self.Name), false, 0},
		{"a block of this node released", []any{claim(mine, self.Name)}, release(mine), false, dirtyPaths | dirtyPolicy},
		{"a block of this node going to another", []any{claim(mine, self.Name)}, claim(mine, other.Name), false, dirtyPaths | dirtyPolicy},
		{"a block elsewhere, no external router", nil, claim(elsewhere, other.Name), false, 0},
		{"a block elsewhere, an external router", nil, claim(elsewhere, other.Name), true, dirtyPolicy},
		{"a block elsewhere released, no external router", []any{claim(elsewhere, other.Name)}, release(elsewhere), false, 0},
		{"a block elsewhere released, an external router", []any{claim(elsewhere, other.Name)}, release(elsewhere), true, dirtyPolicy},
		{"an unknown block released", nil, release(elsewhere), true, 0},
		{"an address this node borrowed elsewhere", []any{claim(elsewhere, other.Name)}, borrowed, false, dirtyPaths | dirtyPolicy},
		{"an address another node borrowed elsewhere", []any{claim(elsewhere, other.Name)}, borrowedByOther, false, 0},
		{"a block of no node, with an external router", nil, claim(elsewhere, ""), true, dirtyPolicy},

		{"a BGPConfiguration with a service CIDR", nil, confUpdate(svc), false, dirtySessions | dirtyPaths | dirtyPolicy | dirtyRoutes},
		{"the same BGPConfiguration again", []any{confUpdate(svc)}, confUpdate(svc), false, 0},
		{"the log level", []any{confUpdate(svc)}, confUpdate(debug), false, dirtySessions},
		{"maxPaths", []any{confUpdate(svc)}, confUpdate(maxPaths1), false, dirtySessions | dirtyRoutes},
		{"no BGPConfiguration any more", []any{confUpdate(svc)}, confUpdate(nil), false, dirtySessions | dirtyPaths | dirtyPolicy | dirtyRoutes},

		{"a BGPPeer", nil, model.BGPPeerUpdate{Peer: &tor}, false, dirtySessions},
		{"the same BGPPeer again", []any{model.BGPPeerUpdate{Peer: &tor}}, model.BGPPeerUpdate{Peer: &tor}, false, 0},
		{"a BGPPeer removed", []any{model.BGPPeerUpdate{Peer: &tor}}, model.BGPPeerRemove{Name: "tor"}, false, dirtySessions},
		{"a Secret no BGPPeer uses", []any{model.BGPPeerUpdate{Peer: &tor}}, model.SecretUpdate{Name: "bgp", Data: map[string][]byte{"pw": []byte("x")}}, false, 0},
		{"a Secret a BGPPeer uses", []any{model.BGPPeerUpdate{Peer: &torPw}}, model.SecretUpdate{Name: "bgp", Data: map[string][]byte{"pw": []byte("x")}}, false, dirtySessions},
		{"the same Secret again", []any{model.BGPPeerUpdate{Peer: &torPw}, model.SecretUpdate{Name: "bgp", Data: map[string][]byte{"pw": []byte("x")}}},
			model.SecretUpdate{Name: "bgp", Data: map[string][]byte{"pw": []byte("x")}}, false, 0},
		{"a Secret a BGPPeer uses removed", []any{model.BGPPeerUpdate{Peer: &torPw}, model.SecretUpdate{Name: "bgp", Data: map[string][]byte{"pw": []byte("x")}}},
			model.SecretRemove{Name: "bgp"}, false, dirtySessions},
		{"a BGPFilter", nil, model.BGPFilterUpdate{Filter: model.BGPFilter{Name: "f"}}, false, dirtySessions | dirtyPolicy},
		{"the same BGPFilter again", []any{model.BGPFilterUpdate{Filter: model.BGPFilter{Name: "f"}}}, model.BGPFilterUpdate{Filter: model.BGPFilter{Name: "f"}}, false, 0},
		{"a BGPFilter removed", []any{model.BGPFilterUpdate{Filter: model.BGPFilter{Name: "f"}}}, model.BGPFilterRemove{Name: "f"}, false, dirtySessions | dirtyPolicy},
		{"a BGPFilter that never was", nil, model.BGPFilterRemove{Name: "f"}, false, 0},
		{"communities on the pools", []any{confUpdate(svc)}, confUpdate(func() *v1.BGPConfiguration {
			c := svc.DeepCopy()
			c.Spec.PrefixAdvertisements = []v1.PrefixAdvertisement{{CIDR: "10.244.0.0/16", Communities: []v1.CommunityRef{"65001:1"}}}
			return c
		}()), false, dirtySessions | dirtyPolicy},

		{"in sync", nil, model.InSync{}, false, dirtyNeighbors},
		{"in sync again", []any{model.InSync{}}, model.InSync{}, false, 0},
		{"a pod", nil, model.WorkloadUpdate{Workload: model.Workload{Interface: "cali0123456789a"}}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := newInputs(self.Name)
			for _, m := range c.before {
				in.record(m, c.explainedUsed)
			}
			if got := in.record(c.msg, c.explainedUsed); got != c.want {
				t.Errorf("marks %v, want %v", got, c.want)
			}
		})
	}
}

// TestBlocksMakeOwnAndExplained: this node advertises its blocks and the addresses it borrowed
// in other nodes' blocks; IPAM explains every block and every borrowed address, cluster-wide;
// both follow the blocks as they change and go.
func TestBlocksMakeOwnAndExplained(t *testing.T) {
	in := newInputs("node1")
	p := netip.MustParsePrefix
	steps := []struct {
		msg            any
		own, explained string
	}{
		{claim(p("10.244.1.0/26"), "node1"), "[10.244.1.0/26]", "[10.244.1.0/26]"},
		{claim(p("10.244.2.0/26"), "node2"), "[10.244.1.0/26]", "[10.244.1.0/26 10.244.2.0/26]"},
		{model.BlockUpdate{Block: model.Block{CIDR: p("10.244.2.0/26"), Node: "node2", Borrowed: []model.Borrowed{
			{Addr: netip.MustParseAddr("10.244.2.7"), Node: "node1"}, {Addr: netip.MustParseAddr("10.244.2.8"), Node: "node3"}}}},
			"[10.244.1.0/26 10.244.2.7/32]", "[10.244.1.0/26 10.244.2.0/26 10.244.2.7/32 10.244.2.8/32]"},
		{model.BlockUpdate{Block: model.Block{CIDR: p("10.244.1.0/26"), Node: "node1", Borrowed: []model.Borrowed{
			{Addr: netip.MustParseAddr("10.244.1.5"), Node: "node2"}}}},
			"[10.244.1.0/26 10.244.2.7/32]", "[10.244.1.0/26 10.244.1.5/32 10.244.2.0/26 10.244.2.7/32 10.244.2.8/32]"},
		{claim(p("fd00:10:244:1::/122"), "node1"), "[10.244.1.0/26 10.244.2.7/32 fd00:10:244:1::/122]",
			"[10.244.1.0/26 10.244.1.5/32 10.244.2.0/26 10.244.2.7/32 10.244.2.8/32 fd00:10:244:1::/122]"},
		{release(p("10.244.2.0/26")), "[10.244.1.0/26 fd00:10:244:1::/122]", "[10.244.1.0/26 10.244.1.5/32 fd00:10:244:1::/122]"},
		{claim(p("10.244.1.0/26"), ""), "[fd00:10:244:1::/122]", "[10.244.1.0/26 fd00:10:244:1::/122]"},
	}
	for i, s := range steps {
		in.record(s.msg, false)
		if got := fmtPrefixes(in.own.list()); got != s.own {
			t.Errorf("step %d: own %s, want %s", i, got, s.own)
		}
		if got := fmtPrefixes(in.explained.list()); got != s.explained {
			t.Errorf("step %d: explained %s, want %s", i, got, s.explained)
		}
	}
}

func fmtPrefixes(ps []netip.Prefix) string { return fmt.Sprint(ps) }
