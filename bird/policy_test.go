package bird

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// TestDesiredPolicy: what each kind of session makes of the filter, and the rest of it.
func TestDesiredPolicy(t *testing.T) {
	a := netip.MustParseAddr
	const local = 64512
	mesh := peers.Peer{Address: a("198.51.100.2"), ASN: local, LocalASN: local, Node: "node2"}
	sibling := peers.Peer{Address: a("198.51.100.3"), ASN: local, LocalASN: local, Node: "node3", Sibling: true, RRClient: true}
	ebgpNode := peers.Peer{Address: a("198.51.100.4"), ASN: 65004, LocalASN: local, Node: "node4"}
	tor := peers.Peer{Address: a("198.51.100.250"), ASN: 65000, LocalASN: local}
	keep := peers.Peer{Address: a("198.51.100.251"), ASN: 65001, LocalASN: local, KeepOriginalNextHop: true}
	routeServer := peers.Peer{Address: a("198.51.100.252"), ASN: 65002, LocalASN: local, RouteServer: true}
	ibgpRouter := peers.Peer{Address: a("198.51.100.253"), ASN: local, LocalASN: local}
	show := func(p speaker.Policy) string {
		return fmt.Sprintf("external=%v firstAS=%v keep=%v self=%v siblings=%v", p.External, p.FirstAS, p.KeepNextHop, p.NextHopSelf, p.Siblings)
	}
	for _, c := range []struct {
		name     string
		sessions []peers.Peer
		want     string
	}{
		{"mesh", []peers.Peer{mesh}, "external=[] firstAS=[] keep=[] self=[] siblings=[]"},
		{"sibling reflector", []peers.Peer{sibling}, "external=[] firstAS=[] keep=[] self=[] siblings=[198.51.100.3]"},
		{"eBGP with another node", []peers.Peer{ebgpNode}, "external=[] firstAS=[] keep=[] self=[198.51.100.4] siblings=[]"},
		{"eBGP router", []peers.Peer{tor}, "external=[198.51.100.250] firstAS=[{198.51.100.250 65000}] keep=[] self=[198.51.100.250] siblings=[]"},
		{"keep next hop", []peers.Peer{keep}, "external=[198.51.100.251] firstAS=[{198.51.100.251 65001}] keep=[198.51.100.251] self=[] siblings=[]"},
		{"route server", []peers.Peer{routeServer}, "external=[198.51.100.252] firstAS=[] keep=[] self=[198.51.100.252] siblings=[]"},
		{"iBGP router", []peers.Peer{ibgpRouter}, "external=[198.51.100.253] firstAS=[] keep=[] self=[] siblings=[]"},
	} {
		pol := sessionsPolicy(c.sessions)
		if got := show(pol); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	pools, own, svc := []netip.Prefix{pool, pool6}, []netip.Prefix{blockOf(1)}, []netip.Prefix{netip.MustParsePrefix("203.0.113.0/26")}
	pol := desiredPolicy(pools, own, svc, sessionsPolicy([]peers.Peer{tor}), a("2001:db8:100::1"))
	if !slices.Equal(pol.Pools, pools) || !slices.Equal(pol.Local, own) || !slices.Equal(pol.Services, svc) || pol.IPv6NextHop != a("2001:db8:100::1") ||
		pol.Explained != nil || !slices.Equal(pol.External, []netip.Addr{tor.Address}) {
		t.Errorf("policy %+v", pol)
	}
}

// TestPolicyReconciler: the policy is set when it changed, only then, and again after a
// failure or a new speaker.
func TestPolicyReconciler(t *testing.T) {
	spk := newFakeSpeaker()
	var r policyReconciler
	ctx := context.Background()
	one := speaker.Policy{Pools: []netip.Prefix{pool}}
	two := speaker.Policy{Pools: []netip.Prefix{pool}, Local: []netip.Prefix{blockOf(1)}}
	for i, s := range []struct {
		reset bool
		want  speaker.Policy
		fail  bool
		calls int
	}{
		{want: one, calls: 1},
		{want: one, calls: 0},
		{want: two, calls: 1},
		{want: one, fail: true, calls: 1},
		{want: one, calls: 1},
		{reset: true, want: one, calls: 1},
	} {
		if s.reset {
			r.reset()
		}
		if s.fail {
			spk.fail["policy"] = 1
		}
		err := r.reconcile(ctx, spk, s.want)
		if (err != nil) != s.fail {
			t.Errorf("step %d: error %v", i, err)
		}
		if n := len(spk.takeCalls()); n != s.calls {
			t.Errorf("step %d: %d SetPolicy calls, want %d", i, n, s.calls)
		}
	}
}
