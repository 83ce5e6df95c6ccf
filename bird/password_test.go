package bird

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

func passwordPeer(secret string) []v1.BGPPeer {
	p := v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "pair"}, Spec: v1.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "all()"}}
	if secret != "" {
		p.Spec.Password = &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: secret, Key: "password"}}
	}
	return []v1.BGPPeer{p}
}

func secretsWith(pw string) map[string]map[string][]byte {
	return map[string]map[string][]byte{"bgp-auth": {"password": []byte(pw)}}
}

// stayDown fails if the session with addr gets established within d.
func stayDown(t *testing.T, tn *testNode, addr string, d time.Duration) PeerStatus {
	t.Helper()
	deadline := time.Now().Add(d)
	var last PeerStatus
	for time.Now().Before(deadline) {
		for _, p := range tn.bird.Peers() {
			if p.Address == addr {
				last = p
				if p.State == "established" {
					t.Fatalf("%s: session with %s established: %+v", tn.Name, addr, p)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// TestPasswords: matching passwords establish; a wrong or missing one never does and the status
// says why; a missing Secret keeps the session closed; fixing the Secret re-keys the session.
func TestPasswords(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(61, nil, ""), mkNode(62, nil, "")}
	setup := func(pw string, peers []v1.BGPPeer) func(*Bird) {
		return func(b *Bird) {
			send(b, confUpdate(meshOff()))
			send(b, peerUpdates(peers...)...)
			send(b, secretUpdates(secretsWith(pw))...)
		}
	}
	a := startNode(t, all[0], all, setup("right", passwordPeer("bgp-auth")))
	b := startNode(t, all[1], all, setup("wrong", passwordPeer("bgp-auth")))
	st := stayDown(t, a, "198.51.100.62", 4*time.Second)
	// GoBGP v4 reports a failed connection when its dial times out, about 5 s after the first
	// attempt: keep watching (the session must stay down all along) until the status says why.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(st.Info, "password") && time.Now().Before(deadline); {
		st = stayDown(t, a, "198.51.100.62", time.Second)
	}
	t.Logf("wrong password: %+v", st)
	if !strings.Contains(st.Info, "password") {
		t.Errorf("status of a session with a wrong password does not mention the password: %q", st.Info)
	}

	// The other side has no password at all.
	send(b.bird, peerUpdates(passwordPeer("")...)...)
	st = stayDown(t, a, "198.51.100.62", 4*time.Second)
	t.Logf("missing password at the peer: %+v", st)

	// Our side's Secret is missing: the session is not opened and the status names the Secret.
	send(a.bird, model.SecretRemove{Name: "bgp-auth"})
	send(b.bird, peerUpdates(passwordPeer("bgp-auth")...)...)
	st = stayDown(t, a, "198.51.100.62", 2*time.Second)
	if st.State != "not configured" || !strings.Contains(st.Info, `secret "bgp-auth" not found`) {
		t.Errorf("missing Secret: %+v", st)
	}

	// Both right: the Secret change re-keys the session.
	send(a.bird, secretUpdates(secretsWith("right"))...)
	send(b.bird, secretUpdates(secretsWith("right"))...)
	a.waitPeer(t, addr4(all[1]), "established", 20*time.Second)
	b.routes.waitRoute(t, a.block, addr4(a.Node), 5*time.Second)
}
