package bird

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// frrToR is FRR's bgpd (Debian's frr) as a ToR in netns, without zebra (nothing goes to a
// kernel): eBGP from AS to every neighbour in AS nodeAS, IPv6 unicast only when the neighbours
// are IPv6 addresses. It returns a vtysh for the daemon (one command a line).
func frrToR(t *testing.T, netns string, routerID netip.Addr, as, nodeAS uint32, neighbors ...netip.Addr) (vtysh func(cmd string) string) {
	t.Helper()
	return startFRRToR(t, netns, routerID, as, nodeAS, false, neighbors)
}

// startFRRToR is frrToR; mpBGP activates IPv6 unicast on the IPv4 sessions too.
func startFRRToR(t *testing.T, netns string, routerID netip.Addr, as, nodeAS uint32, mpBGP bool, neighbors []netip.Addr) (vtysh func(cmd string) string) {
	t.Helper()
	u, err := user.Lookup("frr")
	if err != nil {
		t.Fatalf("FRR is not installed (no user frr; hack/install-deps.sh installs it): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// bgpd drops to user frr: its directory must be reachable by it, which t.TempDir is not.
	dir, err := os.MkdirTemp("", "tabby-test-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var b strings.Builder
	fmt.Fprintf(&b, "frr defaults datacenter\nhostname tor\nlog file %s/frr.log\n!\nrouter bgp %d\n bgp router-id %s\n no bgp ebgp-requires-policy\n no bgp default ipv4-unicast\n", dir, as, routerID)
	for _, nb := range neighbors {
		fmt.Fprintf(&b, " neighbor %s remote-as %d\n neighbor %s timers connect 1\n", nb, nodeAS, nb)
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		fmt.Fprintf(&b, " address-family %s unicast\n", fam)
		for _, nb := range neighbors {
			if nb.Is6() == (fam == "ipv6") || mpBGP && fam == "ipv6" {
				fmt.Fprintf(&b, "  neighbor %s activate\n", nb)
			}
		}
		b.WriteString(" exit-address-family\n")
	}
	b.WriteString("!\n")
	for name, content := range map[string]string{"bgpd.conf": b.String(), "frr.log": "", "vtysh.conf": ""} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", netns, "/usr/lib/frr/bgpd", "-f", filepath.Join(dir, "bgpd.conf"), "-i", filepath.Join(dir, "bgpd.pid"),
		"-u", "frr", "-g", "frr", "-z", filepath.Join(dir, "zserv.api"), "--vty_socket", dir, "-P", "0", "-Z", "-n")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Lines of c are commands in a row (vtysh -c for each): "configure terminal\nrouter bgp ...".
	return func(c string) string {
		args := []string{"--vty_socket", dir}
		for _, line := range strings.Split(c, "\n") {
			args = append(args, "-c", line)
		}
		out, _ := exec.Command("vtysh", args...).CombinedOutput()
		return string(out)
	}
}

// frrRoutes6 is FRR's IPv6 unicast table: prefix → the peer each path came from → its global
// next hop, for the valid paths.
func frrRoutes6(vtysh func(string) string) (map[string]map[string]string, string) {
	out := vtysh("show bgp ipv6 unicast json")
	var table struct {
		Routes map[string][]struct {
			Valid    bool   `json:"valid"`
			PeerID   string `json:"peerId"`
			Nexthops []struct {
				IP    string `json:"ip"`
				Scope string `json:"scope"`
			} `json:"nexthops"`
		} `json:"routes"`
	}
	got := map[string]map[string]string{}
	if json.Unmarshal([]byte(out), &table) != nil {
		return got, out
	}
	for p, paths := range table.Routes {
		for _, path := range paths {
			for _, nh := range path.Nexthops {
				if path.Valid && nh.Scope == "global" {
					if got[p] == nil {
						got[p] = map[string]string{}
					}
					got[p][path.PeerID] = nh.IP
				}
			}
		}
	}
	return got, out
}

// TestFRRToRLearnsIPv6: FRR as the ToR, peering over IPv6 with two dual-stack tabby nodes,
// learns each node's IPv6 block from that node with the node's IPv6 address as next hop.
func TestFRRToRLearnsIPv6(t *testing.T) {
	netnstest.Require(t)
	if _, err := os.Stat("/usr/lib/frr/bgpd"); err != nil {
		t.Fatalf("FRR is not installed (hack/install-deps.sh installs it): %v", err)
	}
	tor, tor6 := netip.MustParseAddr("198.51.100.245"), netip.MustParseAddr("2001:db8:100::245")
	all := []model.Node{mkNode(97, nil, ""), mkNode(98, nil, "")}
	for i := range all {
		all[i].BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", 97+i)))
	}
	ns := torNamespace6(t, addr4(all[0]), tor, all[0].BGPAddress.Get(ipfamily.IPv6), tor6)
	if out, err := exec.Command("ip", "addr", "add", all[1].BGPAddress.Get(ipfamily.IPv6).String(), "dev", fmt.Sprintf("tor%d", os.Getpid()%100000), "nodad").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	vtysh := frrToR(t, ns, tor, 65000, v1.DefaultASNumber, addr6(all[0]), addr6(all[1]))
	bgpPeers := []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor6"}, Spec: v1.BGPPeerSpec{PeerIP: tor6.String(), ASNumber: 65000}}}
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, func(b *Bird) {
			send(b, peerUpdates(bgpPeers...)...)
			send(b, poolUpdate(pool6))
			send(b, claims6(97, 98)...)
		}))
	}
	for _, tn := range tns {
		tn.waitPeer(t, tor6, "established", 30*time.Second)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, raw := frrRoutes6(vtysh)
		ok := true
		for i, n := range all {
			if got[block6Of(97+i).String()][addr6(n).String()] != addr6(n).String() {
				ok = false
			}
		}
		if ok {
			t.Logf("FRR's IPv6 table (prefix → peer → next hop): %v", got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("FRR lacks a node's IPv6 block via the node's IPv6 address: %v\n%s\n%s", got, raw, vtysh("show bgp summary"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
