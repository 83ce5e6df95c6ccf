package syncer

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
)

// streamWorld is a small cluster of every kind the syncer sends: nodes (this one, n0, among
// them), pools of both families, IPv4 and IPv6 blocks with dual-stack pods, a FelixConfiguration,
// a BGPConfiguration, peers and a Secret.
func streamWorld(t *testing.T, s *Syncer) {
	t.Helper()
	for i := range 4 {
		s.put(t, streamNode(i, "1", fmt.Sprintf("198.51.100.%d/24", 10+i)))
	}
	s.put(t, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "v4", ResourceVersion: "1"}, Spec: v1.IPPoolSpec{CIDR: "10.244.0.0/16", IPIPMode: v1.IPIPModeCrossSubnet}})
	s.put(t, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "v6", ResourceVersion: "1"}, Spec: v1.IPPoolSpec{CIDR: "fd00:10:244::/48"}})
	for i := range 6 {
		s.put(t, testBlock(i, "1", 4))
		s.put(t, testBlock6(i, "1", 4))
	}
	s.put(t, &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultBGPConfigurationName, ResourceVersion: "1"}, Spec: v1.BGPConfigurationSpec{ASNumber: ptr(uint32(64512))}})
	s.put(t, streamFelixConfig("1", 4096))
	s.put(t, streamPeer("tor", "1", "198.51.100.1"))
	s.put(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "bgp", ResourceVersion: "1"}, Data: map[string][]byte{"password": []byte("a")}})
}

func streamNode(i int, rv, addr string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), ResourceVersion: rv,
		Labels:      map[string]string{"rack": fmt.Sprintf("r%d", i%2)},
		Annotations: map[string]string{v1.AnnotationBGPIPv4Address: addr}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: strings.Split(addr, "/")[0]}}}}
}

func streamPeer(name, rv, ip string) *v1.BGPPeer {
	return &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}, Spec: v1.BGPPeerSpec{PeerIP: ip, ASNumber: 65001}}
}

func streamFelixConfig(rv string, vni int) *v1.FelixConfiguration {
	return &v1.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultFelixConfigurationName, ResourceVersion: rv}, Spec: v1.FelixConfigurationSpec{VXLANVNI: &vni}}
}

func ptr[T any](v T) *T { return &v }

// The change stream, applied to a map per kind, is what Build says of the whole datastore after
// every step of random changes to every kind of object: nodes (joined, gone, readdressed, their
// annotations made invalid, a restart mark, the kubelet's status, a VTEP and its MAC), pools
// (changed, made invalid, deleted, VXLAN on and off), blocks of both families (pods replaced,
// borrowed, dual-stack pods of this node), the FelixConfiguration, the BGPConfiguration, peers,
// filters, Secrets, Services and their EndpointSlices, LoadBalancer pools (randomServiceChange).
// No message it sends changes nothing, nothing it sent is modified afterwards, and the kinds come
// in the contract's order.
func TestStreamMatchesBuild(t *testing.T) {
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
	streamWorld(t, s)
	serviceWorld(t, s)
	st := newStreamState()
	msgs, _ := s.pass()
	st.apply(t, msgs)
	st.check(t, s, "first pass")
	rng := rand.New(rand.NewPCG(3, 39))
	rv := 1
	randomPasses(t, s, st, 2000, func() int {
		n := 1 + rng.IntN(3)
		for range n {
			rv++
			randomChange(t, s, rng, rv)
		}
		return n
	})
}

// randomChange changes one object of a random kind, as version rv.
func randomChange(t *testing.T, s *Syncer, rng *rand.Rand, rv int) {
	t.Helper()
	version := strconv.Itoa(rv)
	switch rng.IntN(11) {
	case 9, 10:
		randomServiceChange(t, s, rng, version)
	case 0, 1, 2: // blocks: most of the changes
		randomBlockChange(t, s, rng, rv)
	case 3, 4:
		i := rng.IntN(6)
		name := fmt.Sprintf("n%d", i)
		old := get[*corev1.Node](s.nodes, name)
		if old == nil {
			s.put(t, streamNode(i, version, fmt.Sprintf("198.51.100.%d/24", 10+i)))
			return
		}
		n := old.DeepCopy()
		n.ResourceVersion = version
		switch rng.IntN(8) {
		case 0:
			s.remove(t, "nodes", name)
			return
		case 7: // its VTEP of either family, and the MAC
			addrKey, macKey, addr := v1.AnnotationVXLANIPv4TunnelAddress, v1.AnnotationVXLANIPv4MAC, fmt.Sprintf("10.244.%d.1", rng.IntN(4))
			if rng.IntN(2) == 0 {
				addrKey, macKey, addr = v1.AnnotationVXLANIPv6TunnelAddress, v1.AnnotationVXLANIPv6MAC, fmt.Sprintf("fd00:10:244:%x::1", rng.IntN(4))
			}
			n.Annotations[addrKey] = addr
			n.Annotations[macKey] = fmt.Sprintf("66:00:00:00:00:%02x", rng.IntN(3)+1)
		case 1:
			n.Annotations = map[string]string{v1.AnnotationBGPIPv4Address: fmt.Sprintf("203.0.113.%d/24", rng.IntN(250)+1),
				v1.AnnotationBGPIPv6Address: fmt.Sprintf("2001:db8::%x/64", rng.IntN(250)+1)}
		case 2: // an invalid annotation: none of them counts
			n.Annotations[v1.AnnotationBGPASN] = "many"
		case 3:
			n.Annotations[v1.AnnotationBGPRestarting] = []string{"2026-11-21T12:00:00Z", "tomorrow"}[rng.IntN(2)]
		case 4: // the kubelet's status report
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[rng.IntN(2)]}}
		case 5:
			n.Labels = map[string]string{"rack": fmt.Sprintf("r%d", rng.IntN(3))}
		case 6: // an annotation tabby does not read
			n.Annotations["example.com/owner"] = version
		}
		s.put(t, n)
	case 5:
		name := []string{"v4", "v6", "extra"}[rng.IntN(3)]
		p := get[*v1.IPPool](s.pools, name)
		if p == nil {
			s.put(t, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: version}, Spec: v1.IPPoolSpec{CIDR: "10.245.0.0/16"}})
			return
		}
		p = p.DeepCopy()
		p.ResourceVersion = version
		switch rng.IntN(6) {
		case 0:
			s.remove(t, "ippools", name)
			return
		case 5: // VXLAN on or off (invalid with IPIP: the pool removed)
			p.Spec.VXLANMode = []v1.VXLANMode{v1.VXLANModeNever, v1.VXLANModeAlways, v1.VXLANModeCrossSubnet}[rng.IntN(3)]
		case 1:
			p.Spec.NATOutgoing = !p.Spec.NATOutgoing
		case 2: // invalid: a pool removed
			p.Spec.BlockSize = 7
		case 3:
			p.Spec.BlockSize = 0
		case 4: // a label: nothing tabby reads
			p.Labels = map[string]string{"v": version}
		}
		s.put(t, p)
	case 6:
		if rng.IntN(3) == 0 {
			randomFilterChange(t, s, rng, version)
			return
		}
		name := []string{"tor", "tor2"}[rng.IntN(2)]
		p := get[*v1.BGPPeer](s.peers, name)
		switch {
		case p == nil:
			s.put(t, streamPeer(name, version, "198.51.100.2"))
		case rng.IntN(4) == 0:
			s.remove(t, "bgppeers", name)
		default:
			p = p.DeepCopy()
			p.ResourceVersion = version
			p.Spec.PeerIP = []string{"198.51.100.1", "198.51.100.3", "not an address"}[rng.IntN(3)]
			s.put(t, p)
		}
	case 7:
		switch rng.IntN(4) {
		case 0:
			if rng.IntN(3) == 0 {
				s.remove(t, "bgpconfigurations", v1.DefaultBGPConfigurationName)
				return
			}
			asn := []uint32{0, 64512, 64513}[rng.IntN(3)] // 0: invalid, the defaults
			s.put(t, &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultBGPConfigurationName, ResourceVersion: version}, Spec: v1.BGPConfigurationSpec{ASNumber: &asn}})
		case 1: // not the singleton: ignored
			s.put(t, &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "other", ResourceVersion: version}})
		default:
			name := []string{"bgp", "bgp2"}[rng.IntN(2)]
			if rng.IntN(3) == 0 {
				s.remove(t, "secrets", testNamespace+"/"+name)
				return
			}
			s.put(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, ResourceVersion: version},
				Data: map[string][]byte{"password": []byte([]string{"a", "b"}[rng.IntN(2)])}})
		}
	case 8:
		switch rng.IntN(4) {
		case 0:
			s.remove(t, "felixconfigurations", v1.DefaultFelixConfigurationName)
		case 1: // the same spec, a new version: nothing tabby reads
			if c := s.felixConfig(); c != nil {
				c = c.DeepCopy()
				c.ResourceVersion = version
				s.put(t, c)
			}
		default: // 0: an invalid VNI, the defaults
			s.put(t, streamFelixConfig(version, []int{0, 4096, 4097}[rng.IntN(3)]))
		}
	}
}

// randomFilterChange creates, changes (validly, invalidly, or in nothing tabby reads) or deletes
// a BGPFilter.
func randomFilterChange(t *testing.T, s *Syncer, rng *rand.Rand, version string) {
	name := []string{"f1", "f2"}[rng.IntN(2)]
	f := get[*v1.BGPFilter](s.filters, name)
	if f == nil {
		s.put(t, &v1.BGPFilter{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: version}})
		return
	}
	f = f.DeepCopy()
	f.ResourceVersion = version
	switch rng.IntN(4) {
	case 0:
		s.remove(t, "bgpfilters", name)
		return
	case 1: // a label: nothing tabby reads
		f.Labels = map[string]string{"v": version}
	case 2:
		cidr := []string{"203.0.113.0/24", "10.244.0.0/16", "10.244.0.1/16"}[rng.IntN(3)] // the last invalid
		f.Spec.ImportV4 = []v1.BGPFilterRuleV4{{CIDR: cidr, MatchOperator: v1.BGPFilterEqual, Action: v1.BGPFilterAccept}}
	case 3:
		f.Spec.ExportV6 = []v1.BGPFilterRuleV6{{Action: []v1.BGPFilterAction{v1.BGPFilterAccept, v1.BGPFilterReject}[rng.IntN(2)]}}
	}
	s.put(t, f)
}

// The first pass sends every object as an update, and InSync after all of them; a pass with
// nothing changed sends nothing.
func TestStreamFirstPassEndsInSync(t *testing.T) {
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
	streamWorld(t, s)
	msgs, _ := s.pass()
	count := map[string]int{}
	for i, m := range msgs {
		if _, ok := m.(model.InSync); ok && i != len(msgs)-1 {
			t.Fatalf("InSync is message %d of %d", i, len(msgs))
		}
		count[fmt.Sprintf("%T", m)]++
	}
	want := map[string]int{"model.NodeUpdate": 4, "model.PoolUpdate": 2, "model.BlockUpdate": 12, "model.WorkloadUpdate": 8,
		"felix.PodIPsUpdate": 1, "model.FelixConfigurationUpdate": 1, "model.BGPConfigurationUpdate": 1, "model.BGPPeerUpdate": 1, "model.SecretUpdate": 1, "model.InSync": 1}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("the first pass sent %v, want %v", count, want)
	}
	// n0's pods in the IPv4 and IPv6 blocks are dual-stack: a Workload each, with both addresses.
	for _, m := range msgs {
		if w, ok := m.(model.WorkloadUpdate); ok && (len(w.Workload.IPs) != 2 || !w.Workload.IPs[0].Is4() || !w.Workload.IPs[1].Is6()) {
			t.Fatalf("workload %+v: want its IPv4 and IPv6 addresses", w.Workload)
		}
	}
	if msgs, _ := s.pass(); len(msgs) != 0 {
		t.Fatalf("a pass with nothing changed sent %v", msgs)
	}
	// Without a FelixConfiguration or a BGPConfiguration, the first pass says so: the defaults.
	s = newTestSyncer(t, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
	if msgs, _ := s.pass(); fmt.Sprint(msgs) != fmt.Sprint([]any{felix.PodIPsUpdate{IPs: map[PodKey][]netip.Addr{}}, model.FelixConfigurationUpdate{}, model.BGPConfigurationUpdate{}, model.InSync{}}) {
		t.Fatalf("the first pass of an empty datastore sent %v", msgs)
	}
}

// A new version of an object that changes nothing tabby reads sends nothing, kind by kind; a pod
// replaced on another node sends the pods' addresses alone.
func TestStreamSendsNothingForAnUnchangedObject(t *testing.T) {
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
	streamWorld(t, s)
	s.pass()
	for _, c := range []struct {
		what   string
		change func()
	}{
		{"node: the kubelet's heartbeat", func() {
			n := get[*corev1.Node](s.nodes, "n1").DeepCopy()
			n.ResourceVersion = "2"
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
			s.put(t, n)
		}},
		{"node: an annotation tabby does not read", func() {
			n := get[*corev1.Node](s.nodes, "n1").DeepCopy()
			n.ResourceVersion = "3"
			n.Annotations["example.com/owner"] = "x"
			s.put(t, n)
		}},
		{"pool: a label", func() {
			p := get[*v1.IPPool](s.pools, "v4").DeepCopy()
			p.ResourceVersion = "2"
			p.Labels = map[string]string{"team": "net"}
			s.put(t, p)
		}},
		{"block: a new version, the same allocations", func() {
			b := get[*v1.IPAMBlock](s.blocks, "b1").DeepCopy()
			b.ResourceVersion = "2"
			s.put(t, b)
		}},
		{"BGPConfiguration: an annotation", func() {
			c := s.bgpConfig().DeepCopy()
			c.ResourceVersion = "2"
			c.Annotations = map[string]string{"note": "x"}
			s.put(t, c)
		}},
		{"FelixConfiguration: a label", func() {
			c := s.felixConfig().DeepCopy()
			c.ResourceVersion = "2"
			c.Labels = map[string]string{"team": "net"}
			s.put(t, c)
		}},
		{"BGPPeer: a label", func() {
			p := get[*v1.BGPPeer](s.peers, "tor").DeepCopy()
			p.ResourceVersion = "2"
			p.Labels = map[string]string{"rack": "r1"}
			s.put(t, p)
		}},
		{"Secret: the same data", func() {
			sec := get[*corev1.Secret](s.secrets, testNamespace+"/bgp").DeepCopy()
			sec.ResourceVersion = "2"
			s.put(t, sec)
		}},
	} {
		c.change()
		if msgs, _ := s.pass(); len(msgs) != 0 {
			t.Errorf("%s: sent %v", c.what, msgs)
		}
	}

	// A pod replaced on n1, in n1's block: one address out, one in, and nothing that moves a route.
	b := get[*v1.IPAMBlock](s.blocks, "b1").DeepCopy()
	b.ResourceVersion = "3"
	b.Spec.Allocations["0"] = v1.Allocation{Handle: "net.new", Namespace: "ns", Pod: "new", Node: "n1"}
	s.put(t, b)
	msgs, _ := s.pass()
	if len(msgs) != 1 {
		t.Fatalf("a pod replaced on another node: sent %v, want the pods' addresses alone", msgs)
	}
	if d, ok := msgs[0].(felix.PodIPsDelta); !ok || len(d.Removed) != 1 || len(d.Added) != 1 || d.Added[0].Pod.Name != "new" {
		t.Fatalf("a pod replaced on another node: sent %#v", msgs[0])
	}
}

// An IPPool that turns invalid is removed from the stream, and the log names the field.
func TestStreamInvalidPoolIsRemoved(t *testing.T) {
	var logs bytes.Buffer
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnUpdate: func([]any) {}})
	streamWorld(t, s)
	s.pass()
	p := get[*v1.IPPool](s.pools, "v4").DeepCopy()
	p.ResourceVersion = "2"
	p.Spec.IPIPMode = "Sometimes"
	s.put(t, p)
	msgs, _ := s.pass()
	if fmt.Sprint(msgs) != fmt.Sprint([]any{model.PoolRemove{Name: "v4"}}) {
		t.Fatalf("an invalid pool: sent %v, want its removal", msgs)
	}
	if !strings.Contains(logs.String(), "spec.ipipMode") {
		t.Fatalf("the log does not name the field: %s", logs.String())
	}
	p = p.DeepCopy()
	p.ResourceVersion = "3"
	p.Spec.IPIPMode = v1.IPIPModeAlways
	s.put(t, p)
	if msgs, _ := s.pass(); len(msgs) != 1 {
		t.Fatalf("the pool fixed: sent %v, want it back", msgs)
	} else if u, ok := msgs[0].(model.PoolUpdate); !ok || u.Pool.IPIPMode != v1.IPIPModeAlways {
		t.Fatalf("the pool fixed: sent %#v", msgs[0])
	}
}

// A FelixConfiguration that turns invalid is sent as nil (the defaults), the log naming the
// field; fixed, it is sent again; deleted, nil again.
func TestStreamInvalidFelixConfigurationIsTheDefaults(t *testing.T) {
	var logs bytes.Buffer
	s := newTestSyncer(t, Config{NodeName: "n0", Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnUpdate: func([]any) {}})
	streamWorld(t, s)
	msgs, _ := s.pass()
	if !slices.ContainsFunc(msgs, func(m any) bool {
		u, ok := m.(model.FelixConfigurationUpdate)
		return ok && u.Config != nil && *u.Config.Spec.VXLANVNI == 4096
	}) {
		t.Fatalf("the first pass does not send the FelixConfiguration: %v", msgs)
	}
	s.put(t, streamFelixConfig("2", 1<<24))
	if msgs, _ := s.pass(); fmt.Sprint(msgs) != fmt.Sprint([]any{model.FelixConfigurationUpdate{}}) {
		t.Fatalf("an invalid FelixConfiguration: sent %v, want nil (the defaults)", msgs)
	}
	if !strings.Contains(logs.String(), "spec.vxlanVNI") {
		t.Fatalf("the log does not name the field: %s", logs.String())
	}
	s.put(t, streamFelixConfig("3", 4097))
	if msgs, _ := s.pass(); len(msgs) != 1 {
		t.Fatalf("the FelixConfiguration fixed: sent %v", msgs)
	} else if u, ok := msgs[0].(model.FelixConfigurationUpdate); !ok || u.Config == nil || *u.Config.Spec.VXLANVNI != 4097 {
		t.Fatalf("the FelixConfiguration fixed: sent %#v", msgs[0])
	}
	s.remove(t, "felixconfigurations", v1.DefaultFelixConfigurationName)
	if msgs, _ := s.pass(); fmt.Sprint(msgs) != fmt.Sprint([]any{model.FelixConfigurationUpdate{}}) {
		t.Fatalf("the FelixConfiguration deleted: sent %v, want nil", msgs)
	}
}
