package bird

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// TestChangesResetOnlyWhatTheyConcern: editing one BGPPeer touches only its session; a
// BGPConfiguration field no session uses touches none; the cluster timers reset the sessions
// between nodes.
func TestChangesResetOnlyWhatTheyConcern(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(85, nil, ""), mkNode(86, nil, "")}
	tor := func(asn uint32) []v1.BGPPeer {
		return []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{Node: "node85", PeerIP: "198.51.100.240", ASNumber: asn}}}
	}
	a := startNode(t, all[0], all, func(b *Bird) { send(b, peerUpdates(tor(65000)...)...) })
	startNode(t, all[1], all, func(b *Bird) { send(b, peerUpdates(tor(65000)...)...) })
	mesh := a.waitPeer(t, addr4(all[1]), "established", 15*time.Second)

	asnOf := func() uint32 {
		for _, p := range a.bird.Peers() {
			if p.Address == "198.51.100.240" {
				return p.ASN
			}
		}
		return 0
	}
	send(a.bird, peerUpdates(tor(65001)...)...)
	deadline := time.Now().Add(5 * time.Second)
	for asnOf() != 65001 {
		if time.Now().After(deadline) {
			t.Fatalf("ToR session not updated: %+v", a.bird.Peers())
		}
		time.Sleep(20 * time.Millisecond)
	}
	send(a.bird, confUpdate(&v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{LogSeverity: "Debug"}}))
	// Let that change be reconciled: the next input change is processed after it.
	send(a.bird, peerUpdates(tor(65002)...)...)
	for asnOf() != 65002 {
		if time.Now().After(deadline) {
			t.Fatalf("ToR session not updated: %+v", a.bird.Peers())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if now := a.waitPeer(t, addr4(all[1]), "established", time.Second); !now.Since.Equal(mesh.Since) {
		t.Errorf("mesh session reset by a ToR BGPPeer or an unrelated BGPConfiguration change: since %v, was %v", now.Since, mesh.Since)
	}

	cfg := &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{KeepaliveTime: &metav1.Duration{Duration: 2 * time.Second}, HoldTime: &metav1.Duration{Duration: 6 * time.Second}}}
	send(a.bird, confUpdate(cfg))
	deadline = time.Now().Add(20 * time.Second)
	for {
		p := a.waitPeer(t, addr4(all[1]), "established", 20*time.Second)
		if p.Since.After(mesh.Since) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("changing the cluster timers did not reset the mesh session")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
