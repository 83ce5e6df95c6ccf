package bird

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// startBIRD2 runs BIRD2 (Debian's bird2) as a ToR at tor in netns, with an eBGP session to node.
func startBIRD2(t *testing.T, netns string, tor, node netip.Addr, torAS, nodeAS uint32, password string) (birdc func(args ...string) string) {
	t.Helper()
	return birdToR{Addr: tor, Node: node, AS: torAS, NodeAS: nodeAS, Password: password}.start(t, netns)
}

// torNamespace makes a named network namespace for the ToR, joined to the test namespace by a
// veth pair: node gets the test end, tor the other, both /24. Removed at cleanup.
func torNamespace(t testing.TB, node, tor netip.Addr) string {
	t.Helper()
	name := fmt.Sprintf("tabby-test-tor-%d", os.Getpid())
	veth := fmt.Sprintf("tor%d", os.Getpid()%100000)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	addNetns(t, name)
	run("ip", "link", "add", veth, "type", "veth", "peer", "name", veth+"p")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", veth).Run() })
	run("ip", "link", "set", veth+"p", "netns", name)
	run("ip", "addr", "add", netip.PrefixFrom(node, 24).String(), "dev", veth)
	run("ip", "link", "set", veth, "up")
	run("ip", "netns", "exec", name, "ip", "addr", "add", netip.PrefixFrom(tor, 24).String(), "dev", veth+"p")
	run("ip", "netns", "exec", name, "ip", "link", "set", veth+"p", "up")
	run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
	return name
}

// TestBIRD2ToR: a real ToR (BIRD2) peers eBGP with TCP MD5 with a tabby node and learns its
// block with the node as next hop; with a wrong password it never does.
func TestBIRD2ToR(t *testing.T) {
	netnstest.Require(t)
	tor, nodeAddr := netip.MustParseAddr("198.51.100.250"), netip.MustParseAddr("198.51.100.91")
	ns := torNamespace(t, nodeAddr, tor)
	birdc := startBIRD2(t, ns, tor, nodeAddr, 65000, 64512, "tor-s3cret")
	n := mkNode(91, nil, "")
	bgpPeers := []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{
		PeerIP: tor.String(), ASNumber: 65000,
		Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "tor-auth", Key: "password"}},
	}}}
	a := startNode(t, n, []model.Node{n}, func(b *Bird) {
		send(b, peerUpdates(bgpPeers...)...)
		send(b, model.SecretUpdate{Name: "tor-auth", Data: map[string][]byte{"password": []byte("wrong")}})
	})
	st := stayDown(t, a, tor.String(), 4*time.Second)
	t.Logf("wrong password with BIRD2: %s: %s", st.State, st.Info)
	if out := birdc("show", "protocols", "tor"); strings.Contains(out, "Established") {
		t.Fatalf("BIRD2 established a session with a wrong password: %s", out)
	}

	send(a.bird, model.SecretUpdate{Name: "tor-auth", Data: map[string][]byte{"password": []byte("tor-s3cret")}})
	for end := time.Now().Add(30 * time.Second); ; {
		if ps := a.bird.Peers(); len(ps) == 1 && ps[0].State == "established" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no session with BIRD2: %+v\n%s", a.bird.Peers(), birdc("show", "protocols", "all", "tor"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := "via " + nodeAddr.String()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := birdc("show", "route", "for", a.block.String(), "all")
		if strings.Contains(out, a.block.String()) && strings.Contains(out, want) && strings.Contains(out, "BGP.as_path: 64512") {
			t.Logf("BIRD2: %s", out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("BIRD2 has no %s %s:\n%s\n%s", a.block, want, out, birdc("show", "protocols", "all", "tor"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
