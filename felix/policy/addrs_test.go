package policy

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// ApplyAddrs keeps each pod's addresses sorted, reports the pods it changed once per change,
// and never writes into a slice a calculation may share.
func TestApplyAddrs(t *testing.T) {
	a, b := Key{Namespace: "ns", Name: "a"}, Key{Namespace: "ns", Name: "b"}
	v4, v4b, v6 := netip.MustParseAddr("10.244.0.7"), netip.MustParseAddr("10.244.1.9"), netip.MustParseAddr("fd00:10:244::7")
	shared := []netip.Addr{v4, v6}
	ips := map[Key][]netip.Addr{a: shared, b: {v4b}}
	var touched []Key
	ApplyAddrs(ips,
		[]PodAddr{{a, v4}, {b, v4b}, {b, v6}}, // b never had v6: no change
		[]PodAddr{{a, v4b}, {a, v6}},          // a has v6 already: no change
		func(k Key) { touched = append(touched, k) })
	want := map[Key][]netip.Addr{a: {v4b, v6}}
	if !reflect.DeepEqual(ips, want) {
		t.Errorf("addresses %v, want %v", ips, want)
	}
	if !slices.Equal(touched, []Key{a, b, a}) {
		t.Errorf("touched %v, want a (removed), b (removed), a (added)", touched)
	}
	if !slices.Equal(shared, []netip.Addr{v4, v6}) {
		t.Errorf("the slice a calculation shares became %v", shared)
	}
}

// A pod stored under another key is taken under its key (and said so), a nil one skipped; the
// input's map is left as it was.
func TestCalculatorMendsPodKeys(t *testing.T) {
	a, b := mkPod("ns/a", "10.244.0.1"), mkPod("ns/b", "10.244.0.2")
	in := Input{Pods: map[Key]*Pod{{Namespace: "ns", Name: "a"}: a, {Namespace: "ns", Name: "renamed"}: b, {Namespace: "ns", Name: "gone"}: nil}}
	c := NewCalculator(in)
	for _, k := range []Key{{Namespace: "ns", Name: "renamed"}, {Namespace: "ns", Name: "a"}} {
		if !c.Explain(k).Known {
			t.Errorf("pod %s unknown to the calculator", k)
		}
	}
	if c.Explain(Key{Namespace: "ns", Name: "b"}).Known || c.Explain(Key{Namespace: "ns", Name: "gone"}).Known {
		t.Error("a pod known under a key it was not stored under, or a nil one")
	}
	if len(c.Problems()) != 1 || !strings.Contains(c.Problems()[0], "stored under key ns/renamed") {
		t.Errorf("problems %q, want the mended key named", c.Problems())
	}
	if in.Pods[Key{Namespace: "ns", Name: "renamed"}].Key != (Key{Namespace: "ns", Name: "b"}) {
		t.Error("the input's pod was modified")
	}
}

// Input.IPs stands in for the pods' own addresses: the same policies over addresses moved
// elsewhere decide every packet as before, a pod's own IPs are then ignored, and an address of
// a pod not in Pods belongs to nobody.
func TestInputIPs(t *testing.T) {
	in := fixture(
		mkPolicy("prod/web-in", spec{PodSelector: *sel("app=web"), Ingress: []ingressRule{{From: peers{podPeer(sel("app=api"))}}}}),
	)
	move := func(a netip.Addr) netip.Addr { b := a.As16(); b[13] += 100; return netip.AddrFrom16(b).Unmap() }
	moved := in
	moved.IPs = map[Key][]netip.Addr{{Namespace: "prod", Name: "stranger"}: {netip.MustParseAddr("10.200.9.9")}}
	var addrs []netip.Addr
	for k, p := range in.Pods {
		for _, a := range p.IPs {
			moved.IPs[k] = append(moved.IPs[k], move(a))
			addrs = append(addrs, a)
		}
	}
	c, m := NewCalculator(in), NewCalculator(moved)
	for _, src := range addrs {
		for _, dst := range addrs {
			want := c.Verdict(Packet{src, dst, "TCP", 80})
			if got := m.Verdict(Packet{move(src), move(dst), "TCP", 80}); got.Allowed != want.Allowed {
				t.Errorf("%v → %v moved: allowed %v (%s), want %v (%s)", src, dst, got.Allowed, got.Reason, want.Allowed, want.Reason)
			}
			if got := m.Verdict(Packet{src, dst, "TCP", 80}); got.Ingress.Pod != nil || got.Egress.Pod != nil {
				t.Errorf("%v → %v: the pods' own addresses still name %v, %v", src, dst, got.Egress.Pod, got.Ingress.Pod)
			}
		}
	}
	if d := m.Verdict(Packet{netip.MustParseAddr("10.200.9.9"), move(podWeb.IPs[0]), "TCP", 80}); d.Egress.Pod != nil || d.Ingress.Pod == nil {
		t.Errorf("from the address of a pod not in Pods to web: %+v", d)
	}
}

// Input.Addrs answers as the calculator reads: IPs when set, else the Pod's own, nothing for an
// unknown pod.
func TestInputAddrs(t *testing.T) {
	web := mkPod("prod/web", "10.0.1.1")
	in := Input{Pods: map[Key]*Pod{web.Key: web}}
	if got := in.Addrs(web.Key); !slices.Equal(got, web.IPs) {
		t.Errorf("without IPs: %v, want the pod's own %v", got, web.IPs)
	}
	moved := []netip.Addr{netip.MustParseAddr("10.244.7.7")}
	in.IPs = map[Key][]netip.Addr{web.Key: moved, {Namespace: "prod", Name: "stranger"}: moved}
	if got := in.Addrs(web.Key); !slices.Equal(got, moved) {
		t.Errorf("with IPs: %v, want %v", got, moved)
	}
	if got := in.Addrs(Key{Namespace: "prod", Name: "stranger"}); got != nil {
		t.Errorf("a pod not in Pods: %v, want none", got)
	}
}
