package bird

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// bfdBound is what a detection may take in these tests: far above 300 ms x 3 (a shared,
// loaded machine), far below the 30 s hold time the peers use, so that only BFD can meet it.
const bfdBound = 6 * time.Second

func bfd300x3() *v1.BFD {
	mult := int32(3)
	return &v1.BFD{Enabled: true, MinRx: &metav1.Duration{Duration: 300 * time.Millisecond}, MinTx: &metav1.Duration{Duration: 300 * time.Millisecond}, Multiplier: &mult}
}

// iptablesRules adds rules (iptables or ip6tables by the address family) to the test's own
// namespace until del is called or the test ends.
func iptablesRules(t testing.TB, v6 bool, rules ...[]string) (del func()) {
	t.Helper()
	netnstest.Require(t)
	bin := "iptables"
	if v6 {
		bin = "ip6tables"
	}
	var added [][]string
	del = func() {
		for _, r := range added {
			_ = exec.Command(bin, append([]string{"-w", "-D"}, r...)...).Run()
		}
		added = nil
	}
	t.Cleanup(del)
	for _, r := range rules {
		if out, err := exec.Command(bin, append([]string{"-w", "-I"}, r...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v: %s", bin, r, err, out)
		}
		added = append(added, r)
	}
	return del
}

// cutFrom drops everything between this namespace and addr, both ways, as a pulled cable does,
// without the link going down (which a router would see at once without BFD).
func cutFrom(t testing.TB, addr netip.Addr) (restore func()) {
	return iptablesRules(t, addr.Is6(), []string{"INPUT", "-s", addr.String(), "-j", "DROP"}, []string{"OUTPUT", "-d", addr.String(), "-j", "DROP"})
}

// dropBFD drops BFD's packets (UDP 3784) between this namespace and addr, both ways: BGP's TCP
// still flows.
func dropBFD(t testing.TB, addr netip.Addr) (restore func()) {
	return iptablesRules(t, addr.Is6(),
		[]string{"INPUT", "-s", addr.String(), "-p", "udp", "--dport", "3784", "-j", "DROP"},
		[]string{"OUTPUT", "-d", addr.String(), "-p", "udp", "--dport", "3784", "-j", "DROP"})
}

// waitBFD waits until the node shows BFD state with peer addr.
func (tn *testNode) waitBFD(t testing.TB, addr netip.Addr, state string, timeout time.Duration) PeerStatus {
	t.Helper()
	var last []PeerStatus
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		last = tn.bird.Peers()
		for _, p := range last {
			if isPeer(p, addr) && p.BFD == state {
				return p
			}
		}
	}
	t.Fatalf("%s: BFD with %s not %s after %v: %+v", tn.Name, addr, state, timeout, last)
	return PeerStatus{}
}

// frrBFDPeer is FRR's BFD session with peer: its status (up, down, init) and how many times it
// went down.
func frrBFDPeer(vtysh func(string) string, peer netip.Addr) (status string, downs int) {
	var list []struct {
		Peer   string `json:"peer"`
		Status string `json:"status"`
		Downs  int    `json:"session-down"`
	}
	_ = json.Unmarshal([]byte(vtysh("show bfd peers json")), &list)
	for _, p := range list {
		if p.Peer == peer.String() {
			status = p.Status
		}
	}
	_ = json.Unmarshal([]byte(vtysh("show bfd peers counters json")), &list)
	for _, p := range list {
		if p.Peer == peer.String() {
			downs = p.Downs
		}
	}
	return status, downs
}

// frrHas tells whether FRR's table has prefix, stale or not.
func frrHas(vtysh func(string) string, prefix netip.Prefix) bool {
	has, _ := frrRoute(vtysh, prefix)
	return has
}

// frrRoute tells whether FRR's table has prefix and whether every path to it is stale (kept by
// FRR as a graceful-restart helper after the session ended).
func frrRoute(vtysh func(string) string, prefix netip.Prefix) (has, stale bool) {
	fam := "ipv4"
	if prefix.Addr().Is6() {
		fam = "ipv6"
	}
	var table struct {
		Routes map[string][]struct {
			Stale bool `json:"stale"`
		} `json:"routes"`
	}
	_ = json.Unmarshal([]byte(vtysh("show bgp "+fam+" unicast json")), &table)
	paths, ok := table.Routes[prefix.String()]
	if !ok || len(paths) == 0 {
		return false, false
	}
	stale = true
	for _, p := range paths {
		stale = stale && p.Stale
	}
	return true, stale
}

// waitFor polls cond until it holds and returns how long that took from start.
func waitFor(t testing.TB, what string, start time.Time, timeout time.Duration, cond func() bool, explain func() string) time.Duration {
	t.Helper()
	for end := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return time.Since(start)
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not after %v\n%s", what, timeout, explain())
		}
	}
}

// bfdToR is a tabby node peering with an FRR ToR that runs BFD (300 ms x 3, hold 30 s), or
// not (FRR's datacenter timers, hold 9 s), over IPv4 or IPv6; the ToR announces a block of
// another rack.
type bfdToR struct {
	tn        *testNode
	frr       frrRouter
	tor, node netip.Addr
	torBlock  netip.Prefix // announced by the ToR
	nodeBlock netip.Prefix // announced by the node
	withBFD   bool         // false: the same ToR without BFD (datacenter timers, 9 s hold)
}

func startBFDToR(t testing.TB, v6, withBFD bool) bfdToR {
	t.Helper()
	netnstest.Require(t)
	if _, err := os.Stat("/usr/lib/frr/bfdd"); err != nil {
		t.Fatalf("FRR's bfdd is not installed (hack/install-deps.sh installs frr): %v", err)
	}
	n := mkNode(93, nil, "")
	tor4 := netip.MustParseAddr("198.51.100.243")
	r := bfdToR{tor: tor4, node: addr4(n), torBlock: otherRack, nodeBlock: blockOf(93), withBFD: withBFD}
	var ns string
	if v6 {
		n.BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix("2001:db8:100::93/64"))
		r.tor, r.node, r.torBlock, r.nodeBlock = netip.MustParseAddr("2001:db8:100::243"), addr6(n), block6Of(230), block6Of(93)
		ns = torNamespace6(t, addr4(n), tor4, n.BGPAddress.Get(ipfamily.IPv6), r.tor)
	} else {
		ns = torNamespace(t, addr4(n), tor4)
	}
	r.frr = frrOptions{bfd: withBFD, announce: []netip.Prefix{r.torBlock}}.start(t, ns, tor4, 65000, v1.DefaultASNumber, []netip.Addr{r.node})
	bgpPeers := []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: r.tor.String(), ASNumber: 65000}}}
	if withBFD {
		bgpPeers[0].Spec.BFD = bfd300x3()
	}
	r.tn = startNode(t, n, []model.Node{n}, func(b *Bird) {
		send(b, peerUpdates(bgpPeers...)...)
		if v6 {
			send(b, poolUpdate(pool6))
			send(b, claims6(93, 230)...)
		}
	})
	r.waitUp(t)
	return r
}

// waitUp waits for the session, both BFD sessions and the routes both ways.
func (r bfdToR) waitUp(t testing.TB) {
	t.Helper()
	start := time.Now()
	r.tn.waitPeer(t, r.tor, "established", 90*time.Second)
	if r.withBFD {
		r.tn.waitBFD(t, r.tor, "up", 30*time.Second)
		waitFor(t, "FRR's BFD session up", time.Now(), 30*time.Second, func() bool {
			st, _ := frrBFDPeer(r.frr.vtysh, r.node)
			return st == "up"
		}, func() string { return r.frr.vtysh("show bfd peers") })
	}
	waitFor(t, "FRR learns the node's block", time.Now(), 60*time.Second, func() bool {
		has, stale := frrRoute(r.frr.vtysh, r.nodeBlock)
		return has && !stale
	},
		func() string { return r.frr.vtysh("show bgp summary") })
	r.tn.routes.waitRoute(t, r.torBlock, r.tor, 30*time.Second)
	t.Logf("up after %v", time.Since(start).Round(time.Millisecond))
}

// signalFRR sends sig to every daemon of the ToR.
func (r bfdToR) signalFRR(t testing.TB, sig syscall.Signal) {
	t.Helper()
	for name, p := range r.frr.procs {
		// ip netns exec runs the daemon in its own process; the daemon daemonises not (-d unset).
		if err := p.Signal(sig); err != nil {
			t.Fatalf("signal %v to %s: %v", sig, name, err)
		}
	}
}

// TestBFDWithFRR: with BFD (300 ms x 3) on both sides and a 30 s hold time, FRR as the ToR:
//   - a node cut from its ToR is withdrawn at the ToR, and the ToR's routes leave the node, in
//     BFD's time, not the hold timer's; the session and BFD come back when the cut ends;
//   - a ToR frozen (SIGSTOP) loses its routes at the node in BFD's time;
//   - BFD lost while BGP's TCP flows takes the session down on both sides; it comes back,
//     without a loop of flaps, and BFD comes back up once its packets flow again;
//   - a ToR killed (SIGKILL) loses its routes at the node in BFD's time or sooner.
func TestBFDWithFRR(t *testing.T) {
	for _, fam := range []string{"IPv4", "IPv6"} {
		t.Run(fam, func(t *testing.T) {
			r := startBFDToR(t, fam == "IPv6", true)
			explain := func() string {
				return fmt.Sprintf("%+v\n%s\n%s", r.tn.bird.Peers(), r.frr.vtysh("show bfd peers"), r.frr.vtysh("show bgp summary"))
			}

			// The cut.
			start := time.Now()
			restore := cutFrom(t, r.tor)
			atToR := waitFor(t, "the ToR withdraws the cut node's block", start, bfdBound, func() bool { return !frrHas(r.frr.vtysh, r.nodeBlock) }, explain)
			atNode := waitFor(t, "the node drops the ToR's block", start, bfdBound, func() bool { _, ok := r.tn.routes.get(r.torBlock); return !ok }, explain)
			t.Logf("%s cut: withdrawn at the ToR after %v, the ToR's route gone at the node after %v (hold time 30 s)", fam, atToR.Round(time.Millisecond), atNode.Round(time.Millisecond))
			restore()
			r.waitUp(t)

			// The frozen ToR.
			start = time.Now()
			r.signalFRR(t, syscall.SIGSTOP)
			frozen := waitFor(t, "the node drops the frozen ToR's block", start, bfdBound, func() bool { _, ok := r.tn.routes.get(r.torBlock); return !ok }, func() string { return fmt.Sprintf("%+v", r.tn.bird.Peers()) })
			t.Logf("%s ToR frozen: its route gone at the node after %v", fam, frozen.Round(time.Millisecond))
			r.signalFRR(t, syscall.SIGCONT)
			r.waitUp(t)

			// BFD down with BGP up.
			_, frrDowns := frrBFDPeer(r.frr.vtysh, r.node)
			restore = dropBFD(t, r.tor)
			start = time.Now()
			r.tn.waitBFD(t, r.tor, "down", bfdBound)
			waitFor(t, "the node drops the ToR's block on BFD down", start, bfdBound, func() bool { _, ok := r.tn.routes.get(r.torBlock); return !ok }, explain)
			// Watch the session for a while: it may come back over TCP, but must not flap in a loop.
			var ups int
			wasUp := false
			for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				up := r.tn.waitPeerState(r.tor) == "established"
				if up && !wasUp {
					ups++
				}
				wasUp = up
			}
			st, downs := frrBFDPeer(r.frr.vtysh, r.node)
			t.Logf("%s BFD dropped, TCP flowing: over 15 s the session came up %d times; now tabby %q, FRR BFD %q (went down %d times)",
				fam, ups, r.tn.waitPeerState(r.tor), st, downs-frrDowns)
			if ups > 3 {
				t.Errorf("the session flapped %d times in 15 s with BFD down", ups)
			}
			restore()
			r.waitUp(t)

			// The ToR killed (SIGKILL): its TCP ends at once, its BFD falls silent.
			start = time.Now()
			r.signalFRR(t, syscall.SIGKILL)
			killed := waitFor(t, "the node drops the killed ToR's block", start, bfdBound, func() bool { _, ok := r.tn.routes.get(r.torBlock); return !ok }, func() string { return fmt.Sprintf("%+v", r.tn.bird.Peers()) })
			t.Logf("%s ToR killed: its route gone at the node after %v", fam, killed.Round(time.Millisecond))
		})
	}
}

// waitPeerState is the node's session state with addr, "" when it has none.
func (tn *testNode) waitPeerState(addr netip.Addr) string {
	for _, p := range tn.bird.Peers() {
		if isPeer(p, addr) {
			return p.State
		}
	}
	return ""
}

// TestBFDWithBIRD2: BIRD2 as the ToR with BFD (300 ms x 3) and a 30 s hold time: a cut node is
// withdrawn at the ToR in BFD's time, and the session comes back with BFD up.
func TestBFDWithBIRD2(t *testing.T) {
	netnstest.Require(t)
	tor, nodeAddr := netip.MustParseAddr("198.51.100.242"), netip.MustParseAddr("198.51.100.94")
	ns := torNamespace(t, nodeAddr, tor)
	birdc := birdToR{Addr: tor, Node: nodeAddr, AS: 65000, NodeAS: 64512, BFD: true, Announce: []netip.Prefix{otherRack}}.start(t, ns)
	n := mkNode(94, nil, "")
	bgpPeers := []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: tor.String(), ASNumber: 65000, BFD: bfd300x3()}}}
	tn := startNode(t, n, []model.Node{n}, func(b *Bird) { send(b, peerUpdates(bgpPeers...)...) })
	birdHas := func() bool {
		out := birdc("show", "route", "for", tn.block.String())
		return strings.Contains(out, tn.block.String())
	}
	explain := func() string {
		return fmt.Sprintf("%+v\n%s\n%s", tn.bird.Peers(), birdc("show", "bfd", "sessions"), birdc("show", "protocols", "all", "node"))
	}
	waitUp := func() {
		tn.waitPeer(t, tor, "established", 60*time.Second)
		tn.waitBFD(t, tor, "up", 30*time.Second)
		waitFor(t, "BIRD's BFD session up", time.Now(), 30*time.Second, func() bool {
			return strings.Contains(birdc("show", "bfd", "sessions"), " Up ")
		}, explain)
		waitFor(t, "BIRD learns the node's block", time.Now(), 30*time.Second, birdHas, explain)
		tn.routes.waitRoute(t, otherRack, tor, 30*time.Second)
	}
	waitUp()
	start := time.Now()
	restore := cutFrom(t, tor)
	atToR := waitFor(t, "BIRD withdraws the cut node's block", start, bfdBound, func() bool { return !birdHas() }, explain)
	atNode := waitFor(t, "the node drops BIRD's block", start, bfdBound, func() bool { _, ok := tn.routes.get(otherRack); return !ok }, explain)
	t.Logf("cut: withdrawn at BIRD after %v, BIRD's route gone at the node after %v (hold time 30 s)", atToR.Round(time.Millisecond), atNode.Round(time.Millisecond))
	restore()
	waitUp()
}

// TestBFDMesh: with the BGPConfiguration's bfd (and a 30 s hold time) two tabby nodes drop each
// other's routes in BFD's time when cut apart; a changed bfd is applied without resetting the
// session.
func TestBFDMesh(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(95, nil, ""), mkNode(96, nil, "")}
	cfg := &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{
		KeepaliveTime: &metav1.Duration{Duration: 10 * time.Second}, HoldTime: &metav1.Duration{Duration: 30 * time.Second}, BFD: bfd300x3()}}
	var tns []*testNode
	logs := &msgLog{}
	for i, n := range all {
		var cfgs []func(*Config)
		if i == 0 {
			cfgs = append(cfgs, func(c *Config) { c.Logger = slog.New(logs) })
		}
		tns = append(tns, startNode(t, n, all, func(b *Bird) { send(b, confUpdate(cfg)) }, cfgs...))
	}
	a, b := tns[0], tns[1]
	a.routes.waitRoute(t, b.block, addr4(b.Node), 30*time.Second)
	b.routes.waitRoute(t, a.block, addr4(a.Node), 30*time.Second)
	before := a.waitBFD(t, addr4(b.Node), "up", 30*time.Second)
	b.waitBFD(t, addr4(a.Node), "up", 30*time.Second)

	// A changed bfd: same session, BFD up again.
	changed := cfg.DeepCopy()
	changed.Spec.BFD.MinRx = &metav1.Duration{Duration: 200 * time.Millisecond}
	for _, tn := range tns {
		send(tn.bird, confUpdate(changed))
	}
	waitFor(t, "the changed bfd applied", time.Now(), 30*time.Second, func() bool { return logs.has(bfdChangedMsg) }, func() string { return "" })
	after := a.waitBFD(t, addr4(b.Node), "up", 30*time.Second)
	if after.State != "established" || !after.Since.Equal(before.Since) {
		t.Fatalf("changing bfd reset the session: before %+v, after %+v", before, after)
	}

	peerLabel := ",peer=" + addr4(b.Node).String()
	if m := gather(t, a); m["tabby_bgp_bfd_up"+peerLabel] != 1 || m["tabby_bgp_bfd_down_total"+peerLabel] != 0 {
		t.Errorf("metrics with BFD up: %v", m)
	}

	start := time.Now()
	cutFrom(t, addr4(b.Node))
	gone := waitFor(t, "a drops b's block", start, bfdBound, func() bool { _, ok := a.routes.get(b.block); return !ok },
		func() string { return fmt.Sprintf("%+v", a.bird.Peers()) })
	t.Logf("mesh cut: b's block gone at a after %v (hold time 30 s)", gone.Round(time.Millisecond))
	if p := a.waitBFD(t, addr4(b.Node), "down", bfdBound); p.BFDDowns == 0 {
		t.Errorf("BFD downs not counted: %+v", p)
	}
	if m := gather(t, a); m["tabby_bgp_bfd_up"+peerLabel] != 0 || m["tabby_bgp_bfd_down_total"+peerLabel] < 1 {
		t.Errorf("metrics after the cut: %v", m)
	}
}

// gather is the node's metrics: name,label=value... → value.
func gather(t *testing.T, tn *testNode) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, col := range tn.bird.Collectors() {
		reg.MustRegister(col)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return got
}

// msgLog is a slog.Handler that keeps the messages at info and above, for a test that waits
// for one, and passes them on to the test logger.
type msgLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *msgLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelInfo }
func (l *msgLog) WithAttrs([]slog.Attr) slog.Handler               { return l }
func (l *msgLog) WithGroup(string) slog.Handler                    { return l }
func (l *msgLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}

func (l *msgLog) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.msgs, msg)
}

// isPeer tells whether p is the session with addr (its Address may carry a port).
func isPeer(p PeerStatus, addr netip.Addr) bool {
	return p.Address == addr.String() || netip.MustParseAddrPort(orPort(p.Address)).Addr() == addr
}
