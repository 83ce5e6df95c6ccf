package main

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The admin tier's figures are only what they claim if the 100 leave the real flows' verdicts
// alone, make web's client walk their rules, and the measured policy selects all 1,000 pods
// and is what lets the client into api. felix's own evaluation checks it, without a lab.

var (
	benchWeb    = policy.Key{Namespace: nsName(0), Name: "web"}
	benchAPI    = policy.Key{Namespace: nsName(0), Name: "api"}
	benchClient = policy.Key{Namespace: nsName(1), Name: "client"}
)

// benchInput is the bench's datastore as felix reads it, web's veth its only endpoint.
func benchInput(t *testing.T) policy.Input {
	in := policy.Input{Pods: map[policy.Key]*policy.Pod{}, Namespaces: map[string]*policy.Namespace{},
		Policies: map[policy.Key]*networkingv1.NetworkPolicy{}, Admin: map[policy.AdminKey]*policy.AdminPolicy{}}
	for i := range namespaces {
		in.Namespaces[nsName(i)] = &policy.Namespace{Name: nsName(i), Labels: map[string]string{"team": "t" + strconv.Itoa(i)}}
	}
	http := []policy.NamedPort{{Name: "http", Protocol: "TCP", Port: 80}}
	for i, p := range []struct {
		key    policy.Key
		labels map[string]string
	}{
		{benchWeb, map[string]string{"app": "web"}},
		{benchAPI, map[string]string{"app": "api"}},
		{benchClient, map[string]string{"app": "client", "tier": "client"}},
	} {
		in.Pods[p.key] = &policy.Pod{Key: p.key, Labels: p.labels, NamedPorts: http, IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, 1, byte(10 + i)})}}
	}
	for i := range fakePods {
		ns, name, labels := fakePod(i)
		k := policy.Key{Namespace: ns, Name: name}
		in.Pods[k] = &policy.Pod{Key: k, Labels: labels, IPs: []netip.Addr{fakeIP(i)}, NamedPorts: []policy.NamedPort{{Name: "http", Protocol: "TCP", Port: 8080}}}
	}
	for _, np := range benchPolicies() {
		in.Policies[policy.Key{Namespace: np.Namespace, Name: np.Name}] = np
	}
	for _, anp := range benchAdmins() {
		p := policy.FromANP(anp)
		if len(p.Unsupported) > 0 {
			t.Fatalf("%s: %v", p.Key(), p.Unsupported)
		}
		in.Admin[p.Key()] = p
	}
	in.Endpoints = []policy.Endpoint{{Interface: "caliweb", Pod: benchWeb}}
	return in
}

func benchPacket(in policy.Input, from, to policy.Key) policy.Packet {
	return policy.Packet{Src: in.Pods[from].IPs[0], Dst: in.Pods[to].IPs[0], Protocol: "TCP", Port: 80}
}

func TestAdminsLeaveTheRealFlowsAlone(t *testing.T) {
	in := benchInput(t)
	d := policy.Verdict(in, benchPacket(in, benchClient, benchWeb))
	if !d.Allowed || d.Ingress.Tier != "NetworkPolicy" || d.Ingress.Passed == nil {
		t.Errorf("client → web: want allowed by NetworkPolicy after a Pass; got %s (passed by %v)", d.Reason, d.Ingress.Passed)
	}
	if e := policy.Explain(in, benchWeb); len(e.AdminIngress) != webAdmins+wideAdmins {
		t.Errorf("web's ingress: %d AdminNetworkPolicies, want %d: %v", len(e.AdminIngress), webAdmins+wideAdmins, e.AdminIngress)
	}
	if d := policy.Verdict(in, benchPacket(in, benchClient, benchAPI)); d.Allowed {
		t.Errorf("client → api: want isolated by NetworkPolicy; got %s", d.Reason)
	}
}

// Web's ingress chain holds the admin rules the client's connections are checked against
// before the Pass to NetworkPolicy.
func TestWebChainWalksTheAdminRules(t *testing.T) {
	r := policy.Compute(benchInput(t), ipfamily.IPv4)
	rules := r.Chains[policy.ToWorkloadPrefix+"caliweb"]
	admin := 0
	for _, rule := range rules {
		if strings.HasPrefix(rule, "-g "+policy.ToPassPrefix) {
			break
		}
		admin++
	}
	t.Logf("web's chain: %d admin rules, then the pass chain's %d", admin, len(r.Chains[policy.ToPassPrefix+"caliweb"]))
	if admin < 4*webAdmins {
		t.Errorf("web's chain: %d rules before its pass chain, want at least %d:\n%s", admin, 4*webAdmins, strings.Join(rules, "\n"))
	}
}

func TestMeasuredAdminSelectsAllPodsAndAllowsTheClient(t *testing.T) {
	in := benchInput(t)
	measured := policy.FromANP(apiAllowANP(0))
	in.Admin[measured.Key()] = measured
	d := policy.Verdict(in, benchPacket(in, benchClient, benchAPI))
	if !d.Allowed || d.Ingress.DecidedBy == nil || d.Ingress.DecidedBy.Policy != measured.Key() {
		t.Fatalf("client → api: want allowed by %s; got %s", measured.Key(), d.Reason)
	}
	calc, n := policy.NewCalculator(in), 0
	for k := range in.Pods {
		e := calc.Explain(k)
		for _, a := range e.AdminIngress {
			if a == measured.Key() {
				n++
			}
		}
	}
	if n != fakePods+3 {
		t.Errorf("%s selects %d pods, want %d", measured.Key(), n, fakePods+3)
	}
}
