package peers

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func node(name, addr string, labels map[string]string, asn uint32, cluster string) model.Node {
	return model.Node{Name: name, BGPAddress: ipfamily.PairOf(netip.MustParsePrefix(addr), netip.Prefix{}), Labels: labels, ASN: asn, RRClusterID: cluster}
}

// withIPv6Address is n with an IPv6 BGP address.
func withIPv6Address(n model.Node, addr string) model.Node {
	n.BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix(addr))
	return n
}

func peer(name string, spec v1.BGPPeerSpec) v1.BGPPeer {
	return v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func ptr[T any](v T) *T { return &v }

var (
	n1 = node("n1", "198.51.100.1/24", map[string]string{"rack": "a"}, 0, "")
	n2 = node("n2", "198.51.100.2/24", map[string]string{"rack": "a"}, 0, "")
	n3 = node("n3", "198.51.100.3/24", map[string]string{"rack": "b"}, 0, "")
	rr = map[string]string{"tabby.dev/route-reflector": ""}
	r1 = node("r1", "198.51.100.101/24", rr, 0, "244.0.0.1")
	r2 = node("r2", "198.51.100.102/24", rr, 0, "244.0.0.1")
	// Calico's route-reflector topology: mesh off, everyone peers with the RRs.
	rrPeers = []v1.BGPPeer{peer("to-rrs", v1.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "has(tabby.dev/route-reflector)"})}
	meshOff = &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{NodeToNodeMeshEnabled: ptr(false)}}
)

// short renders a result as "addr/type/node/asn[/flags]" lines for compact expectations.
func short(r Result) string {
	var out []string
	for _, p := range r.Peers {
		s := p.Address.String() + ":" + strconv.Itoa(int(p.Port)) + "/" + string(p.Type) + "/" + p.Node + "/" + strconv.Itoa(int(p.ASN))
		if p.RRClient {
			s += "/rrc=" + p.ClusterID
		}
		if p.Sibling {
			s += "/sibling"
		}
		if p.Password != "" {
			s += "/pw=" + p.Password
		}
		if p.Err != "" {
			s += "/err"
		}
		if p.EBGPMultihop != 0 {
			s += "/ttl=" + strconv.Itoa(int(p.EBGPMultihop))
		}
		if p.KeepOriginalNextHop {
			s += "/keepnh"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestCompute(t *testing.T) {
	secrets := map[string]map[string][]byte{"bgp": {"tor": []byte("s3cret")}}
	cases := []struct {
		name    string
		local   string
		nodes   []model.Node
		cfg     *v1.BGPConfiguration
		peers   []v1.BGPPeer
		want    string
		wantASN uint32
		problem string
	}{
		{name: "mesh default", local: "n1", nodes: []model.Node{n1, n2, n3},
			want: "198.51.100.2:179/mesh/n2/64512 198.51.100.3:179/mesh/n3/64512", wantASN: 64512},
		{name: "mesh off", local: "n1", nodes: []model.Node{n1, n2, n3}, cfg: meshOff, want: ""},
		{name: "mesh skips nodes without address", local: "n1", nodes: []model.Node{n1, {Name: "bare"}}, want: ""},
		{name: "mesh and selectors skip a node without BGP", local: "n1", nodes: []model.Node{n1, n2, func() model.Node { n := n3; n.NoBGP = true; return n }()},
			peers: []v1.BGPPeer{peer("all", v1.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "all()"})},
			want:  "198.51.100.2:179/node-specific/n2/64512"},
		{name: "asn and port from configuration, annotation wins", local: "n1",
			nodes: []model.Node{n1, node("n2", "198.51.100.2/24", nil, 65002, "")},
			cfg:   &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{ASNumber: ptr(uint32(65001)), ListenPort: ptr(int32(1179))}},
			want:  "198.51.100.2:1179/mesh/n2/65002", wantASN: 65001},
		{name: "route reflectors left out of the mesh", local: "n1", nodes: []model.Node{n1, n2, r1},
			want: "198.51.100.2:179/mesh/n2/64512"},
		{name: "rr node has no mesh", local: "r1", nodes: []model.Node{n1, n2, r1}, want: ""},
		{name: "rr topology, client side", local: "n1", nodes: []model.Node{n1, n2, r1, r2}, cfg: meshOff, peers: rrPeers,
			want: "198.51.100.101:179/route-reflector/r1/64512 198.51.100.102:179/route-reflector/r2/64512"},
		{name: "rr topology, reflector side learns clients from the same object", local: "r1", nodes: []model.Node{n1, n2, r1, r2}, cfg: meshOff, peers: rrPeers,
			want: "198.51.100.2:179/route-reflector-client/n2/64512/rrc=244.0.0.1 198.51.100.1:179/route-reflector-client/n1/64512/rrc=244.0.0.1 198.51.100.102:179/route-reflector/r2/64512/rrc=244.0.0.1/sibling"},
		{name: "a reflector of another cluster is a client, not a sibling", local: "r1", nodes: []model.Node{n1, r1, r2, node("r3", "198.51.100.103/24", rr, 0, "244.0.0.3")}, cfg: meshOff, peers: rrPeers,
			want: "198.51.100.1:179/route-reflector-client/n1/64512/rrc=244.0.0.1 198.51.100.102:179/route-reflector/r2/64512/rrc=244.0.0.1/sibling 198.51.100.103:179/route-reflector/r3/64512/rrc=244.0.0.1"},
		{name: "global peer with port and password", local: "n1", nodes: []model.Node{n1},
			peers: []v1.BGPPeer{peer("tor", v1.BGPPeerSpec{PeerIP: "203.0.113.1:1179", ASNumber: 65000, Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "bgp", Key: "tor"}}})},
			want:  "203.0.113.1:1179/global//65000/pw=s3cret"},
		{name: "missing secret is an error, not an open session", local: "n1", nodes: []model.Node{n1},
			peers: []v1.BGPPeer{peer("tor", v1.BGPPeerSpec{PeerIP: "203.0.113.1", ASNumber: 65000, Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "bgp", Key: "nope"}}})},
			want:  "203.0.113.1:179/global//65000/err"},
		{name: "node-specific peer for another node", local: "n1", nodes: []model.Node{n1, n2}, cfg: meshOff,
			peers: []v1.BGPPeer{peer("tor", v1.BGPPeerSpec{Node: "n2", PeerIP: "203.0.113.1", ASNumber: 65000})}, want: ""},
		{name: "node-specific peer for this node, multihop, keep next hop", local: "n1", nodes: []model.Node{n1, n2}, cfg: meshOff,
			peers: []v1.BGPPeer{peer("tor", v1.BGPPeerSpec{Node: "n1", PeerIP: "203.0.113.1", ASNumber: 65000, EBGPMultihop: 3, KeepOriginalNextHop: true})},
			want:  "203.0.113.1:179/node-specific//65000/ttl=3/keepnh"},
		{name: "nodeSelector", local: "n3", nodes: []model.Node{n1, n3}, cfg: meshOff,
			peers: []v1.BGPPeer{peer("rack-a", v1.BGPPeerSpec{NodeSelector: "rack == 'a'", PeerIP: "203.0.113.1", ASNumber: 65000}),
				peer("rack-b", v1.BGPPeerSpec{NodeSelector: "rack == 'b'", PeerIP: "203.0.113.2", ASNumber: 65000})},
			want: "203.0.113.2:179/node-specific//65000"},
		{name: "peerIP of another tabby node is iBGP with cluster timers", local: "n1", nodes: []model.Node{n1, n2}, cfg: meshOff,
			peers: []v1.BGPPeer{peer("to-n2", v1.BGPPeerSpec{PeerIP: "198.51.100.2", ASNumber: 64512})},
			want:  "198.51.100.2:179/global/n2/64512"},
		{name: "explicit peer wins over the mesh for one address", local: "n1", nodes: []model.Node{n1, n2},
			peers: []v1.BGPPeer{peer("to-n2", v1.BGPPeerSpec{PeerIP: "198.51.100.2", ASNumber: 64512})},
			want:  "198.51.100.2:179/global/n2/64512", problem: "asked for by bgppeer/to-n2 and mesh"},
		{name: "bad selector ignored with a problem", local: "n1", nodes: []model.Node{n1},
			peers: []v1.BGPPeer{peer("bad", v1.BGPPeerSpec{NodeSelector: "has(", PeerIP: "203.0.113.1", ASNumber: 65000})},
			want:  "", problem: "bgppeer/bad ignored"},
		{name: "ebgp between tabby nodes is not reflected", local: "r1", nodes: []model.Node{r1, node("x", "198.51.100.9/24", nil, 65009, "")}, cfg: meshOff,
			peers: []v1.BGPPeer{peer("all", v1.BGPPeerSpec{PeerSelector: "all()"})},
			want:  "198.51.100.9:179/global/x/65009"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Compute(Input{LocalNode: c.local, Nodes: c.nodes, Config: c.cfg, Peers: c.peers, Secrets: secrets})
			if err != nil {
				t.Fatal(err)
			}
			// The reflector case lists addresses sorted; compare as sets of words.
			if got := short(res); !sameWords(got, c.want) {
				t.Errorf("peers:\n got %s\nwant %s", got, c.want)
			}
			if c.wantASN != 0 && res.Speaker.ASN != c.wantASN {
				t.Errorf("ASN %d, want %d", res.Speaker.ASN, c.wantASN)
			}
			if c.problem != "" && !strings.Contains(strings.Join(res.Problems, "\n"), c.problem) {
				t.Errorf("problems %q, want one containing %q", res.Problems, c.problem)
			}
			for _, p := range res.Peers {
				if p.Node != "" && (p.Keepalive != 3*time.Second || p.Hold != 9*time.Second) {
					t.Errorf("%s: timers %v/%v, want 3s/9s between nodes", p.Address, p.Keepalive, p.Hold)
				}
			}
		})
	}
}

func sameWords(a, b string) bool {
	wa, wb := strings.Fields(a), strings.Fields(b)
	if len(wa) != len(wb) {
		return false
	}
	m := map[string]int{}
	for _, w := range wa {
		m[w]++
	}
	for _, w := range wb {
		m[w]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

func TestComputeErrors(t *testing.T) {
	if _, err := Compute(Input{LocalNode: "ghost", Nodes: []model.Node{n1}}); err == nil || !strings.Contains(err.Error(), `"ghost"`) {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := Compute(Input{LocalNode: "bare", Nodes: []model.Node{{Name: "bare"}}}); err == nil || !strings.Contains(err.Error(), v1.AnnotationBGPIPv4Address) {
		t.Errorf("no address: %v", err)
	}
}

func TestTimersFromConfiguration(t *testing.T) {
	cfg := &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{KeepaliveTime: &metav1.Duration{Duration: time.Second}, HoldTime: &metav1.Duration{Duration: 3 * time.Second}}}
	res, err := Compute(Input{LocalNode: "n1", Nodes: []model.Node{n1, n2}, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Peers[0]; p.Keepalive != time.Second || p.Hold != 3*time.Second {
		t.Errorf("timers %v/%v", p.Keepalive, p.Hold)
	}
}

// A BGPPeer with an IPv6 address: a session on a node with an IPv6 BGP address, a problem (and
// no session) on one without; the node's own IPv6 address is never a peer.
func TestIPv6PeerIP(t *testing.T) {
	dual := withIPv6Address(n1, "2001:db8:100::1/64")
	tor6 := peer("tor6", v1.BGPPeerSpec{PeerIP: "[2001:db8:100::fe]:1179", ASNumber: 65000})
	self6 := peer("self6", v1.BGPPeerSpec{PeerIP: "2001:db8:100::1", ASNumber: 65000})
	res, err := Compute(Input{LocalNode: "n1", Nodes: []model.Node{dual, n2}, Peers: []v1.BGPPeer{tor6, self6}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range res.Peers {
		got = append(got, netip.AddrPortFrom(p.Address, p.Port).String()+"/"+string(p.Type))
	}
	if want := "198.51.100.2:179/mesh [2001:db8:100::fe]:1179/global"; strings.Join(got, " ") != want {
		t.Errorf("dual-stack node: peers %v, want %s", got, want)
	}
	if len(res.Problems) != 0 {
		t.Errorf("dual-stack node: problems %v", res.Problems)
	}
	res, err = Compute(Input{LocalNode: "n2", Nodes: []model.Node{dual, n2}, Peers: []v1.BGPPeer{tor6}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Peers) != 1 || res.Peers[0].Address != n1.BGPAddress.Get(ipfamily.IPv4).Addr() {
		t.Errorf("IPv4-only node: peers %+v, want the mesh session only", res.Peers)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "bgppeer/tor6") || !strings.Contains(res.Problems[0], "no IPv6 BGP address") {
		t.Errorf("IPv4-only node: problems %v", res.Problems)
	}
}

// An IPv6-only node: a router ID from its name (stable, in 240.0.0.0/4, different per node),
// mesh sessions over IPv6 to nodes that have IPv6, none to an IPv4-only node, and a BGPPeer at
// an IPv4 address is a problem, not a session.
func TestIPv6OnlyNode(t *testing.T) {
	a := withIPv6Address(model.Node{Name: "a"}, "2001:db8:100::a/64")
	b := withIPv6Address(model.Node{Name: "b"}, "2001:db8:100::b/64")
	v4 := n1
	tor := peer("tor4", v1.BGPPeerSpec{PeerIP: "198.51.100.254", ASNumber: 65000})
	res, err := Compute(Input{LocalNode: "a", Nodes: []model.Node{a, b, v4}, Peers: []v1.BGPPeer{tor}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Speaker.RouterID
	if !netip.MustParsePrefix("240.0.0.0/4").Contains(id) || id != RouterID(a) || id == RouterID(b) {
		t.Errorf("router IDs a %s b %s", id, RouterID(b))
	}
	if len(res.Peers) != 1 || res.Peers[0].Address != b.BGPAddress.Get(ipfamily.IPv6).Addr() || res.Peers[0].Type != Mesh {
		t.Errorf("peers %+v, want the mesh session to b over IPv6", res.Peers)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "no IPv4 BGP address") {
		t.Errorf("problems %v", res.Problems)
	}
	if _, err := Compute(Input{LocalNode: "c", Nodes: []model.Node{{Name: "c"}}}); err == nil {
		t.Error("a node with no BGP address at all was accepted")
	}
}

// A node's BGP address is its annotation; a node that has not annotated itself yet is reached
// at its IPv4 InternalIP (as a /32), never at an IPv6 one.
func TestBGPAddress(t *testing.T) {
	annotated := withIPv6Address(node("a", "198.51.100.11/25", nil, 0, ""), "2001:db8:100::11/64")
	annotated.InternalIP = ipfamily.PairOf(netip.MustParseAddr("198.51.100.99"), netip.Addr{})
	for _, c := range []struct {
		name string
		n    model.Node
		want ipfamily.Pair[netip.Prefix]
	}{
		{"annotated", annotated, annotated.BGPAddress},
		{"not annotated yet", model.Node{Name: "b", InternalIP: ipfamily.PairOf(netip.MustParseAddr("198.51.100.12"), netip.MustParseAddr("2001:db8:100::12"))},
			ipfamily.PairOf(netip.MustParsePrefix("198.51.100.12/32"), netip.Prefix{})},
		{"nothing known", model.Node{Name: "c"}, ipfamily.Pair[netip.Prefix]{}},
	} {
		if got := BGPAddress(c.n); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Only what Compute reads of a node makes its sessions worth computing again.
func TestSessionsDiffer(t *testing.T) {
	base := node("a", "198.51.100.11/24", map[string]string{"rack": "a"}, 0, "")
	bare := model.Node{Name: "b", InternalIP: ipfamily.PairOf(netip.MustParseAddr("198.51.100.12"), netip.Addr{})}
	for _, c := range []struct {
		name string
		a, b model.Node
		want bool
	}{
		{"same", base, base, false},
		{"restart mark", base, func() model.Node { n := base; n.RestartingUntil = time.Now(); return n }(), false},
		{"tunnel address", base, func() model.Node { n := base; n.IPIPTunnelAddr = netip.MustParseAddr("10.244.1.1"); return n }(), false},
		{"InternalIP of an annotated node", base, func() model.Node {
			n := base
			n.InternalIP.Set(ipfamily.IPv4, netip.MustParseAddr("198.51.100.99"))
			return n
		}(), false},
		{"InternalIP of a node not annotated yet", bare, func() model.Node {
			n := bare
			n.InternalIP.Set(ipfamily.IPv4, netip.MustParseAddr("198.51.100.99"))
			return n
		}(), true},
		{"labels", base, func() model.Node { n := base; n.Labels = map[string]string{"rack": "b"}; return n }(), true},
		{"IPv6 address", base, withIPv6Address(base, "2001:db8:100::11/64"), true},
		{"AS", base, func() model.Node { n := base; n.ASN = 65001; return n }(), true},
		{"reflector", base, func() model.Node { n := base; n.RRClusterID = "244.0.0.1"; return n }(), true},
		{"BGP off", base, func() model.Node { n := base; n.NoBGP = true; return n }(), true},
		{"VTEP", base, func() model.Node {
			n := base
			n.VXLANTunnelAddr.Set(ipfamily.IPv4, netip.MustParseAddr("10.244.1.1"))
			return n
		}(), false},
	} {
		if got := SessionsDiffer(c.a, c.b); got != c.want {
			t.Errorf("%s: SessionsDiffer = %v, want %v", c.name, got, c.want)
		}
	}
}

// BFD: the BGPConfiguration's bfd goes to the sessions between tabby nodes (mesh and
// peerSelector), a BGPPeer's own bfd (enabled or not) wins, and an external router gets BFD
// only from its BGPPeer; unset fields take the defaults.
func TestBFD(t *testing.T) {
	ms := func(d int) *metav1.Duration { return &metav1.Duration{Duration: time.Duration(d) * time.Millisecond} }
	cfg := &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{BFD: &v1.BFD{Enabled: true, MinRx: ms(100), Multiplier: ptr[int32](5)}}}
	tor := peer("tor", v1.BGPPeerSpec{PeerIP: "198.51.100.254", ASNumber: 65000, BFD: &v1.BFD{Enabled: true}})
	plain := peer("plain", v1.BGPPeerSpec{PeerIP: "198.51.100.253", ASNumber: 65000})
	toRR := peer("to-rr", v1.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "has(tabby.dev/route-reflector)"})
	offToN3 := peer("off-n3", v1.BGPPeerSpec{PeerIP: "198.51.100.3", ASNumber: 64512, BFD: &v1.BFD{Enabled: false}})
	res, err := Compute(Input{LocalNode: "n1", Nodes: []model.Node{n1, n2, n3, r1}, Config: cfg, Peers: []v1.BGPPeer{tor, plain, toRR, offToN3}})
	if err != nil {
		t.Fatal(err)
	}
	mesh := BFD{Enabled: true, MinRx: 100 * time.Millisecond, MinTx: DefaultBFDInterval, Multiplier: 5}
	want := map[string]BFD{
		"198.51.100.2":   mesh,                                                                                         // mesh
		"198.51.100.3":   {},                                                                                           // its BGPPeer turns BFD off
		"198.51.100.101": mesh,                                                                                         // selected route reflector
		"198.51.100.253": {},                                                                                           // external router without bfd
		"198.51.100.254": {Enabled: true, MinRx: 300 * time.Millisecond, MinTx: 300 * time.Millisecond, Multiplier: 3}, // defaults
	}
	if len(res.Peers) != len(want) {
		t.Fatalf("peers %s, want %d", short(res), len(want))
	}
	for _, p := range res.Peers {
		if w := want[p.Address.String()]; p.BFD != w {
			t.Errorf("peer %s (%s): BFD %+v, want %+v", p.Address, p.Source, p.BFD, w)
		}
	}
	// Without a BGPConfiguration bfd, no session has BFD.
	res, err = Compute(Input{LocalNode: "n1", Nodes: []model.Node{n1, n2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Peers[0].BFD.Enabled {
		t.Errorf("mesh without bfd: %+v", res.Peers[0].BFD)
	}
}
