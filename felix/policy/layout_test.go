package policy

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

var wantForward = []string{
	"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
	"-m conntrack --ctstate INVALID -j DROP",
	"-i cali+ -j tabby-from-wl-dispatch",
	"-o cali+ -j tabby-to-wl-dispatch",
	"-i cali+ -j ACCEPT",
	"-o cali+ -j ACCEPT",
}

// wantInput is tabby-INPUT, always there: a pod's traffic to its own node goes to the
// admin tiers' host chains, its replies and established connections untouched.
var wantInput = []string{
	"-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
	"-i cali+ -j tabby-wl-to-host-dispatch",
}

func TestZeroPoliciesRendersOnlyTheFixedChains(t *testing.T) {
	for _, fam := range ipfamily.All {
		r := Compute(fixture(), fam)
		want := Rendered{
			Chains: map[string][]string{ChainForward: wantForward, ChainFromWorkload: {}, ChainToWorkload: {}, ChainInput: wantInput, ChainToHost: {}},
			IPSets: map[string]IPSet{},
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("%v: got %#v, want %#v", fam, r, want)
		}
	}
	if JumpRule != "-j tabby-FORWARD" || ParentChain != "FORWARD" {
		t.Errorf("jump %q in %s", JumpRule, ParentChain)
	}
}

// TestLayout pins the whole rendering of a small case: dispatch order (by interface),
// RETURN for a direction no policy selects, goto for one that does, the default drops.
func TestLayout(t *testing.T) {
	in := fixture(mkPolicy("prod/web-in", spec{PodSelector: *sel("app=web"), Ingress: []ingressRule{{From: peers{podPeer(sel("app=api"))}}}}))
	r := Compute(in, ipfamily.IPv4)
	web, db := iface(podWeb.Key), iface(podDB.Key)
	if db > web {
		t.Fatalf("fixture: expected %s to sort before %s", db, web)
	}
	api := setName(setKindPods, ipfamily.IPv4, `ns="prod" pods="app=api"`)
	want := map[string][]string{
		ChainForward:      wantForward,
		ChainInput:        wantInput,
		ChainToHost:       {},
		ChainFromWorkload: {"-i " + db + " -j RETURN", "-i " + web + " -j RETURN", "-i cali+ -j DROP"},
		ChainToWorkload:   {"-o " + db + " -j RETURN", "-o " + web + " -g tabby-tw-" + web, "-o cali+ -j DROP"},
		"tabby-tw-" + web: {"-m set --match-set " + api + " src -j RETURN", "-j DROP"},
	}
	if !reflect.DeepEqual(r.Chains, want) {
		t.Errorf("chains:\n got  %q\n want %q", r.Chains, want)
	}
	wantSets := map[string]IPSet{api: {Type: "hash:ip", Family: ipfamily.IPv4, Members: []string{"10.0.1.3"}}}
	if !reflect.DeepEqual(r.IPSets, wantSets) {
		t.Errorf("sets: got %v, want %v", r.IPSets, wantSets)
	}
}

func TestPolicyElsewhereStillDropsUnknownWorkloads(t *testing.T) {
	r := Compute(fixture(mkPolicy("dev/deny", spec{PolicyTypes: bothTypes()})), ipfamily.IPv4)
	if got := endpointChains(r); got != nil {
		t.Errorf("endpoint chains %v, want none: no local pod is selected", got)
	}
	if len(r.IPSets) != 0 {
		t.Errorf("sets %v, want none", r.IPSets)
	}
	if d := r.Chains[ChainToWorkload]; len(d) != 3 || d[2] != "-o cali+ -j DROP" {
		t.Errorf("%s = %q", ChainToWorkload, d)
	}
}

// TestIPv6RendersFromTheSameSource: the same policies give the same chains with the IPv6
// members, sets named for IPv6, and IPv4-only peers dropped.
func TestIPv6RendersFromTheSameSource(t *testing.T) {
	in := fixture(mkPolicy("prod/p", spec{Ingress: []ingressRule{
		{From: peers{nsPeer(sel("kubernetes.io/metadata.name=dev"))}, Ports: ports{port("", 80)}},
		{From: peers{blockPeer("::/0", "fd00::1:0/112"), blockPeer("10.0.0.0/8")}},
	}}))
	r := Compute(in, ipfamily.IPv6)
	newKernel(t, r, ipfamily.IPv6)
	w := iface(podWeb.Key)
	want := []string{
		"-p tcp -m set --match-set {fd00::2:1} src -m tcp --dport 80 -j RETURN", // dev/tool has no IPv6
		"-m set --match-set {8000::/1 | ::/1 | fd00::1:0/112 nomatch} src -j RETURN",
		"-j DROP",
	}
	if got := readable(r, r.Chains[ToWorkloadPrefix+w]); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for name, s := range r.IPSets {
		if !strings.HasPrefix(name, "tabby-p6-") && !strings.HasPrefix(name, "tabby-c6-") || s.Family != ipfamily.IPv6 {
			t.Errorf("set %s %v: want an IPv6 set", name, s.Family)
		}
	}
	r4 := Compute(in, ipfamily.IPv4)
	for name := range r4.IPSets {
		if _, ok := r.IPSets[name]; ok {
			t.Errorf("set %s in both families: ipset names are global", name)
		}
	}
}

func TestSetNames(t *testing.T) {
	re := regexp.MustCompile(`^tabby-[pcn][46]-[a-z2-7]{20}$`)
	// The name of a selection is part of the upgrade contract: a change renames every set.
	if got := setName(setKindPods, ipfamily.IPv4, `ns="prod" pods="app=api"`); got != "tabby-p4-m5guyuhidvyzlegxvxzq" {
		t.Errorf("setName = %q; changing it churns every set on upgrade", got)
	}
	// Identical selections share a set across policies and namespaces when a namespace
	// selector makes the policy's namespace irrelevant; a bare podSelector does not.
	shared := peers{bothPeer(sel("team=a"), sel("app=web")), podPeer(sel("app=web"))}
	in := fixture(
		mkPolicy("prod/p1", spec{Ingress: []ingressRule{{From: shared}}}),
		mkPolicy("prod/p2", spec{PodSelector: *sel("app=db"), Ingress: []ingressRule{{From: shared}}}),
		mkPolicy("ops/p3", spec{Ingress: []ingressRule{{From: shared}}}),
	)
	r := Compute(in, ipfamily.IPv4)
	if len(r.IPSets) != 2 {
		t.Errorf("sets %v: want 2 (the shared namespace+pod selection, prod's app=web)", r.IPSets)
	}
	for name := range r.IPSets {
		if !re.MatchString(name) || len(name) > 31 || !IsSetName(name) {
			t.Errorf("set name %q", name)
		}
	}
	for _, name := range []string{"tabby-masq-ipam-pools", "tabby-x4-m5guyuhidvyzlegxvxzq", "tabby-p4-short", "kube-p4-m5guyuhidvyzlegxvxzq"} {
		if IsSetName(name) {
			t.Errorf("IsSetName(%q) = true", name)
		}
	}
}

// TestNewPodChangesOnlyOneSet: a pod joining a selection changes that set's members and
// nothing else, so the writer's batch is one `ipset add`.
func TestNewPodChangesOnlyOneSet(t *testing.T) {
	pols := []*networkingv1.NetworkPolicy{
		mkPolicy("prod/p", spec{Ingress: []ingressRule{
			{From: peers{nsPeer(sel("team=b"))}},
			{From: peers{podPeer(sel("app=api")), blockPeer("192.0.2.0/24")}, Ports: ports{namedPort("", "http")}},
		}, Egress: []egressRule{{To: peers{podPeer(sel("app=db"))}, Ports: ports{namedPort("", "pg")}}}}),
	}
	before := Compute(fixture(pols...), ipfamily.IPv4)
	in := fixture(pols...)
	newPod := mkPod("dev/new", "10.0.2.9", "app=new")
	in.Pods[newPod.Key] = newPod
	after := Compute(in, ipfamily.IPv4)
	if !reflect.DeepEqual(before.Chains, after.Chains) {
		t.Errorf("chains changed:\n%q\n%q", before.Chains, after.Chains)
	}
	var changed []string
	for name, s := range after.IPSets {
		if !reflect.DeepEqual(before.IPSets[name], s) {
			changed = append(changed, name)
		}
	}
	if len(changed) != 1 || len(after.IPSets) != len(before.IPSets) {
		t.Fatalf("changed sets %v (of %d, %d before): want exactly the namespace selection", changed, len(after.IPSets), len(before.IPSets))
	}
	if got := after.IPSets[changed[0]].Members; !slices.Equal(got, []string{"10.0.2.1", "10.0.2.2", "10.0.2.9"}) {
		t.Errorf("members %v", got)
	}
}

func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		g := &generator{rng: rng}
		in := g.input()
		for _, fam := range ipfamily.All {
			a := Compute(in, fam)
			shuffled := in
			shuffled.Endpoints = slices.Clone(in.Endpoints)
			rng.Shuffle(len(shuffled.Endpoints), func(i, j int) {
				shuffled.Endpoints[i], shuffled.Endpoints[j] = shuffled.Endpoints[j], shuffled.Endpoints[i]
			})
			if b := Compute(shuffled, fam); !reflect.DeepEqual(a, b) {
				t.Fatalf("two computations differ:\n%v\n%v", a, b)
			}
		}
	}
}

func TestEndpointsThatCannotBePoliced(t *testing.T) {
	in := fixture(mkPolicy("prod/deny", spec{PolicyTypes: bothTypes()}))
	web := iface(podWeb.Key)
	in.Endpoints = []Endpoint{
		{Interface: web, Pod: podWeb.Key},
		{Interface: web, Pod: podWeb.Key}, // a duplicate of the same pod is harmless
		{Interface: "cali+", Pod: podDB.Key},
		{Interface: "calitoolongname00", Pod: podDB.Key},
		{Interface: "eth0", Pod: podDB.Key},
		{Interface: "cali0000000000a", Pod: podDB.Key},
		{Interface: "cali0000000000a", Pod: podAPI.Key},                     // two pods, one interface
		{Interface: "cali0000000000b", Pod: Key{Namespace: "x", Name: "y"}}, // not known yet
		{Interface: "cali0000000000c", Pod: podAgent.Key},                   // host network
	}
	c := NewCalculator(in)
	r := c.Render(ipfamily.IPv4)
	want := []string{"-o " + web + " -g tabby-tw-" + web, "-o cali+ -j DROP"}
	if got := r.Chains[ChainToWorkload]; !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", ChainToWorkload, got, want)
	}
	problems := strings.Join(c.Problems(), "\n")
	for _, s := range []string{`"cali+"`, `"calitoolongname00"`, `"eth0"`, `"cali0000000000a": claimed by several pods`} {
		if !strings.Contains(problems, s) {
			t.Errorf("problems do not mention %s:\n%s", s, problems)
		}
	}
}

func TestProblemsNameTheField(t *testing.T) {
	c := NewCalculator(fixture(mkPolicy("prod/p", spec{
		PolicyTypes: []networkingv1.PolicyType{"Sideways"},
		Ingress: []ingressRule{{
			From:  peers{{}, blockPeer("banana"), blockPeer("10.0.0.0/8", "fd00::/8")},
			Ports: ports{port("ICMP", 1), portSpan("", 90, 80), port("", 0)},
		}},
	})))
	want := []string{
		`policy prod/p: spec.ingress[0].from[0]: no podSelector, namespaceSelector or ipBlock; the peer matches nothing`,
		`policy prod/p: spec.ingress[0].from[1]: ipBlock: cidr "banana": invalid CIDR address: banana; the peer matches nothing`,
		`policy prod/p: spec.ingress[0].from[2]: ipBlock: except[0] fd00::/8: not of the family of cidr 10.0.0.0/8; the peer matches nothing`,
		`policy prod/p: spec.ingress[0].ports[0]: protocol "ICMP": not TCP, UDP or SCTP; the port matches nothing`,
		`policy prod/p: spec.ingress[0].ports[1]: endPort 80: not in 90-65535; the port matches nothing`,
		`policy prod/p: spec.ingress[0].ports[2]: port 0: not in 1-65535; the port matches nothing`,
		`policy prod/p: spec.policyTypes[0]: unknown type "Sideways" ignored`,
	}
	if got := c.Problems(); !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
