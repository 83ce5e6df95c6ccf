package bird

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// birdToR is a BIRD2 ToR that announces static prefixes to one tabby node over eBGP.
type birdToR struct {
	Addr, Node netip.Addr
	AS, NodeAS uint32
	// RouteServer: BIRD's `rs client`: the ToR does not put its own AS first (route server
	// mode), so a static route goes out with an empty AS path.
	RouteServer bool
	// Prepend is put in front of the AS path of everything the ToR announces.
	Prepend  []uint32
	Announce []netip.Prefix
	Password string // TCP MD5, none when empty
	// IPv6 adds an IPv6 unicast channel to the session (MP-BGP over the IPv4 session), whose
	// next hop is Addr6 when set.
	IPv6 bool
	// Addr6 and Node6 set: the session runs between these IPv6 addresses and carries IPv6
	// unicast only.
	Addr6, Node6 netip.Addr
	// More are further tabby nodes (AS NodeAS) the ToR peers with the same way as with Node
	// (or Node6): protocols node2, node3, ...
	More []netip.Addr
	// BFD runs BIRD's BFD (300 ms x 3) on the sessions, whose hold time is then 30 s.
	BFD bool
}

func (r birdToR) start(t *testing.T, netns string) (birdc func(args ...string) string) {
	t.Helper()
	birdc, _ = r.startLogged(t, netns)
	return birdc
}

// startLogged is start, with BIRD's log (every class) readable through log.
func (r birdToR) startLogged(t *testing.T, netns string) (birdc func(args ...string) string, log func() string) {
	t.Helper()
	if _, err := exec.LookPath("bird"); err != nil {
		t.Fatalf("bird2 is not installed (hack/install-deps.sh installs it): %v", err)
	}
	var statics, statics6, export strings.Builder
	for _, p := range r.Announce {
		if p.Addr().Is6() {
			fmt.Fprintf(&statics6, "\troute %s blackhole;\n", p)
		} else {
			fmt.Fprintf(&statics, "\troute %s blackhole;\n", p)
		}
	}
	for _, as := range r.Prepend {
		fmt.Fprintf(&export, "bgp_path.prepend(%d); ", as)
	}
	opts := ""
	if r.RouteServer {
		opts += "rs client; "
	}
	if r.Password != "" {
		opts += fmt.Sprintf("password %q; ", r.Password)
	}
	if r.BFD {
		// BIRD waits error wait time (60 s by default) before it takes a session again after
		// an error such as a BFD down.
		opts += "bfd on; hold time 30; keepalive time 10; error wait time 1, 10; "
	}
	filter := fmt.Sprintf("filter { if source != RTS_STATIC then reject; %s accept; }", export.String())
	channel4 := fmt.Sprintf("ipv4 { import all; next hop self; export %s; };", filter)
	channel6 := fmt.Sprintf("ipv6 { import all; export %s; };", filter)
	if r.Addr6.IsValid() {
		channel6 = fmt.Sprintf("ipv6 { import all; next hop address %s; export %s; };", r.Addr6, filter)
	}
	local, neighbor := r.Addr, r.Node
	switch {
	case r.Node6.IsValid():
		local, neighbor, channel4 = r.Addr6, r.Node6, ""
	case !r.IPv6:
		channel6 = ""
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "bird.log")
	conf := fmt.Sprintf(`
log %[4]q all;
router id %[1]s;
protocol device { }
protocol static announced { ipv4; %[2]s }
protocol static announced6 { ipv6; %[3]s }
`, r.Addr, statics.String(), statics6.String(), logPath)
	if r.BFD {
		conf += "protocol bfd { interface \"*\" { min rx interval 300 ms; min tx interval 300 ms; multiplier 3; }; }\n"
	}
	for i, nb := range append([]netip.Addr{neighbor}, r.More...) {
		name := "node"
		if i > 0 {
			name = fmt.Sprintf("node%d", i+1)
		}
		conf += fmt.Sprintf(`
protocol bgp %[1]s {
	local %[2]s as %[3]d;
	neighbor %[4]s as %[5]d;
	strict bind yes;
	connect delay time 1;
	connect retry time 1;
	%[6]s
	%[7]s
	%[8]s
}
`, name, local, r.AS, nb, r.NodeAS, opts, channel4, channel6)
	}
	cfg, sock := filepath.Join(dir, "bird.conf"), filepath.Join(dir, "bird.ctl")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", netns, "bird", "-f", "-c", cfg, "-s", sock, "-P", filepath.Join(dir, "bird.pid"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return func(args ...string) string {
			out, _ := exec.Command("birdc", append([]string{"-s", sock}, args...)...).CombinedOutput()
			return string(out)
		}, func() string {
			b, _ := os.ReadFile(logPath)
			return string(b)
		}
}

// hijackCluster is a route reflector (node201) with two clients (node21 owns the block a ToR
// targets, node22 is a bystander), the reflector peering eBGP with a BIRD2 ToR. otherRack is a
// block of a node behind the ToR (AS-per-rack): the ToR's legitimate route, and the signal that
// the ToR's routes have arrived.
type hijackCluster struct {
	rr, owner, bystander *testNode
	tor                  netip.Addr
}

var otherRack = blockOf(230)

func startHijackCluster(t *testing.T, tor birdToR, routeServer bool) hijackCluster {
	t.Helper()
	netnstest.Require(t)
	all := []model.Node{mkNode(201, rrLabel, "244.0.0.9"), mkNode(21, nil, ""), mkNode(22, nil, "")}
	tor.Addr, tor.Node, tor.NodeAS = netip.MustParseAddr("198.51.100.249"), addr4(all[0]), v1.DefaultASNumber
	ns := torNamespace(t, tor.Node, tor.Addr)
	tor.start(t, ns)
	bgpPeers := append(calicoRRPeers(), v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"},
		Spec: v1.BGPPeerSpec{Node: "node201", PeerIP: tor.Addr.String(), ASNumber: tor.AS, RouteServer: routeServer}})
	setup := func(b *Bird) { send(b, confUpdate(meshOff())); send(b, peerUpdates(bgpPeers...)...) }
	c := hijackCluster{tor: tor.Addr}
	c.rr = startNode(t, all[0], all, setup)
	c.owner = startNode(t, all[1], all, setup)
	c.bystander = startNode(t, all[2], all, setup)
	c.rr.waitPeer(t, tor.Addr, "established", 30*time.Second)
	return c
}

// keepsOwnerPath fails unless the reflector and the bystander route the owner's block to the
// owner, once the ToR's legitimate route has arrived at the reflector.
func (c hijackCluster) keepsOwnerPath(t *testing.T) {
	t.Helper()
	c.rr.routes.waitRoute(t, otherRack, c.tor, 15*time.Second)
	for _, tn := range []*testNode{c.rr, c.bystander} {
		tn.routes.waitRoute(t, c.owner.block, addr4(c.owner.Node), 10*time.Second)
	}
	// Settled: a path the ToR won would have replaced the owner's by now (the ToR's routes
	// are in), and it must not come later either.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, tn := range []*testNode{c.rr, c.bystander} {
			if nh, _ := tn.routes.get(c.owner.block); nh != addr4(c.owner.Node) {
				t.Fatalf("%s routes node21's block %s via %s: the ToR took it", tn.Name, c.owner.block, nh)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRouteServerToRCannotTakeABlock: a ToR in route-server mode (empty AS path) announcing
// another node's exact block. Without routeServer on its BGPPeer the path fails the first-AS
// check; with it, it is accepted but loses to the owner's own announcement (LOCAL_PREF), on the
// reflector and so on every client. Before, it won on the reflector (equal AS-path length, then
// eBGP over iBGP) and the clients lost the owner's block.
func TestRouteServerToRCannotTakeABlock(t *testing.T) {
	for _, rs := range []bool{false, true} {
		t.Run(fmt.Sprintf("routeServer=%v", rs), func(t *testing.T) {
			c := startHijackCluster(t, birdToR{AS: 65000, RouteServer: true, Announce: []netip.Prefix{blockOf(21), otherRack}}, rs)
			if !rs {
				// Not declared a route server: nothing from it passes the first-AS check,
				// not even its legitimate route; the owner's path is all there is.
				c.rr.waitPeer(t, c.tor, "established", 5*time.Second)
				for _, tn := range []*testNode{c.rr, c.bystander} {
					tn.routes.waitRoute(t, c.owner.block, addr4(c.owner.Node), 10*time.Second)
				}
				deadline := time.Now().Add(3 * time.Second)
				for time.Now().Before(deadline) {
					if nh, ok := c.rr.routes.get(otherRack); ok {
						t.Fatalf("route with an AS path not beginning with the ToR's AS accepted: %s via %s", otherRack, nh)
					}
					if nh, _ := c.rr.routes.get(c.owner.block); nh != addr4(c.owner.Node) {
						t.Fatalf("reflector routes node21's block via %s", nh)
					}
					time.Sleep(50 * time.Millisecond)
				}
				return
			}
			c.keepsOwnerPath(t)
		})
	}
}

// TestToRMoreSpecificInsideABlockRejected: a ToR announcing a /28 inside another node's /26 is
// rejected: IPAM explains no such prefix. Its other rack's block (AS-per-rack) is learned.
func TestToRMoreSpecificInsideABlockRejected(t *testing.T) {
	inside := netip.MustParsePrefix("10.244.21.16/28")
	c := startHijackCluster(t, birdToR{AS: 65000, Announce: []netip.Prefix{inside, otherRack}}, false)
	c.keepsOwnerPath(t)
	for _, tn := range []*testNode{c.rr, c.bystander} {
		if nh, ok := tn.routes.get(inside); ok {
			t.Fatalf("%s installed the ToR's %s via %s inside node21's block", tn.Name, inside, nh)
		}
	}
}

// TestFirstASEnforced: an eBGP ToR whose AS path does not begin with its own AS is refused,
// unless its BGPPeer says it is a route server; AS-per-rack routes (its own AS first) pass.
func TestFirstASEnforced(t *testing.T) {
	t.Run("foreign first AS", func(t *testing.T) {
		c := startHijackCluster(t, birdToR{AS: 65000, RouteServer: true, Prepend: []uint32{65099}, Announce: []netip.Prefix{otherRack}}, false)
		c.bystander.routes.waitRoute(t, c.owner.block, addr4(c.owner.Node), 10*time.Second)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if nh, ok := c.rr.routes.get(otherRack); ok {
				t.Fatalf("path [65099] from AS 65000 accepted: %s via %s", otherRack, nh)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("declared route server", func(t *testing.T) {
		c := startHijackCluster(t, birdToR{AS: 65000, RouteServer: true, Prepend: []uint32{65099}, Announce: []netip.Prefix{otherRack}}, true)
		c.rr.routes.waitRoute(t, otherRack, c.tor, 15*time.Second)
	})
	t.Run("AS per rack", func(t *testing.T) {
		c := startHijackCluster(t, birdToR{AS: 65000, Announce: []netip.Prefix{otherRack}}, false)
		c.rr.routes.waitRoute(t, otherRack, c.tor, 15*time.Second)
	})
}
