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
	return frrOptions{mpBGP: mpBGP}.start(t, netns, routerID, as, nodeAS, neighbors).vtysh
}

// frrOptions are the ToR's optional parts.
type frrOptions struct {
	mpBGP bool // IPv6 unicast on the IPv4 sessions too
	// bfd runs zebra and bfdd beside bgpd, with `neighbor X bfd`, a 30 s hold time and a
	// profile of bfdMs receive and transmit interval and detect multiplier bfdMult (300 ms x 3
	// if unset).
	bfd            bool
	bfdMs, bfdMult int
	// announce are prefixes the ToR originates (network statements, no import check).
	announce []netip.Prefix
}

// frrRouter is a running FRR ToR: vtysh, and the daemons' processes (bgpd, and with BFD zebra
// and bfdd) for a test that freezes or kills them.
type frrRouter struct {
	vtysh func(cmd string) string
	procs map[string]*os.Process
}

func (o frrOptions) start(t testing.TB, netns string, routerID netip.Addr, as, nodeAS uint32, neighbors []netip.Addr) frrRouter {
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
	if len(o.announce) > 0 {
		b.WriteString(" no bgp network import-check\n")
	}
	for _, nb := range neighbors {
		fmt.Fprintf(&b, " neighbor %s remote-as %d\n neighbor %s timers connect 1\n", nb, nodeAS, nb)
		if o.bfd {
			// A 30 s hold time: what goes faster than that is BFD's doing.
			fmt.Fprintf(&b, " neighbor %s bfd\n neighbor %s bfd profile tabby\n neighbor %s timers 10 30\n", nb, nb, nb)
		}
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		fmt.Fprintf(&b, " address-family %s unicast\n", fam)
		for _, nb := range neighbors {
			if nb.Is6() == (fam == "ipv6") || o.mpBGP && fam == "ipv6" {
				fmt.Fprintf(&b, "  neighbor %s activate\n", nb)
			}
		}
		for _, p := range o.announce {
			if p.Addr().Is6() == (fam == "ipv6") {
				fmt.Fprintf(&b, "  network %s\n", p)
			}
		}
		b.WriteString(" exit-address-family\n")
	}
	b.WriteString("!\n")
	ms, mult := o.bfdMs, o.bfdMult
	if ms == 0 {
		ms, mult = 300, 3
	}
	files := map[string]string{"bgpd.conf": b.String(), "frr.log": "", "vtysh.conf": ""}
	if o.bfd {
		files["zebra.conf"] = fmt.Sprintf("hostname tor\nlog file %s/zebra.log\n", dir)
		files["bfdd.conf"] = fmt.Sprintf("hostname tor\nlog file %s/bfdd.log\n!\nbfd\n profile tabby\n  receive-interval %d\n  transmit-interval %d\n  detect-multiplier %d\n !\n!\n", dir, ms, ms, mult)
		files["zebra.log"], files["bfdd.log"] = "", ""
	}
	for name, content := range files {
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
	r := frrRouter{procs: map[string]*os.Process{}}
	run := func(daemon string, args ...string) {
		t.Helper()
		args = append([]string{"netns", "exec", netns, "/usr/lib/frr/" + daemon, "-f", filepath.Join(dir, daemon+".conf"), "-i", filepath.Join(dir, daemon+".pid"),
			"-u", "frr", "-g", "frr", "-z", filepath.Join(dir, "zserv.api"), "--vty_socket", dir, "-P", "0"}, args...)
		cmd := exec.Command("ip", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A daemon the test froze must go on to die.
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGCONT); _ = cmd.Process.Kill(); _ = cmd.Wait() })
		r.procs[daemon] = cmd.Process
	}
	if o.bfd {
		// bgpd asks bfdd for its sessions through zebra. zebra touches only the ToR's namespace,
		// and bgpd (-n) gives it no route.
		run("zebra")
		waitFile(t, filepath.Join(dir, "zserv.api"))
		run("bfdd", "--bfdctl", filepath.Join(dir, "bfdd.sock"))
		run("bgpd", "-n")
	} else {
		run("bgpd", "-Z", "-n")
	}
	// Lines of c are commands in a row (vtysh -c for each): "configure terminal\nrouter bgp ...".
	r.vtysh = func(c string) string {
		args := []string{"--vty_socket", dir}
		for _, line := range strings.Split(c, "\n") {
			args = append(args, "-c", line)
		}
		out, _ := exec.Command("vtysh", args...).CombinedOutput()
		return string(out)
	}
	return r
}

// waitFile waits for a daemon's socket to appear.
func waitFile(t testing.TB, p string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s did not appear", p)
		}
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
