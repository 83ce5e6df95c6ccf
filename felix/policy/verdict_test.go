package policy

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestExplain(t *testing.T) {
	in := fixture(
		mkPolicy("prod/z-web-in", spec{PodSelector: *sel("app=web"), Ingress: []ingressRule{{}}}),
		mkPolicy("prod/a-all", spec{PolicyTypes: bothTypes()}),
		mkPolicy("prod/db-out", spec{PodSelector: *sel("app=db"), PolicyTypes: egressOnly()}),
		mkPolicy("dev/all", spec{PolicyTypes: bothTypes()}),
	)
	cases := []struct {
		pod  Key
		want Explanation
	}{
		{podWeb.Key, Explanation{Pod: podWeb.Key, Known: true,
			Ingress: []Key{{Namespace: "prod", Name: "a-all"}, {Namespace: "prod", Name: "z-web-in"}}, Egress: []Key{{Namespace: "prod", Name: "a-all"}}}},
		{podDB.Key, Explanation{Pod: podDB.Key, Known: true,
			Ingress: []Key{{Namespace: "prod", Name: "a-all"}}, Egress: []Key{{Namespace: "prod", Name: "a-all"}, {Namespace: "prod", Name: "db-out"}}}},
		{podMon.Key, Explanation{Pod: podMon.Key, Known: true}},
		{podAgent.Key, Explanation{Pod: podAgent.Key, Known: true, HostNetwork: true}},
		{Key{Namespace: "prod", Name: "gone"}, Explanation{Pod: Key{Namespace: "prod", Name: "gone"}}},
	}
	for _, tc := range cases {
		if got := Explain(in, tc.pod); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Explain(%s) = %+v, want %+v", tc.pod, got, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	in := fixture(
		mkPolicy("prod/web-in", spec{PodSelector: *sel("app=web"),
			Ingress: []ingressRule{{From: peers{podPeer(sel("app=api"))}, Ports: ports{namedPort("", "http")}}}}),
		mkPolicy("prod/web-out", spec{PodSelector: *sel("app=web"), PolicyTypes: egressOnly(),
			Egress: []egressRule{
				{To: peers{bothPeer(sel(), sel("app=web"))}, Ports: ports{namedPort("", "http")}},
				{To: peers{blockPeer("0.0.0.0/0", "10.0.0.0/8")}, Ports: ports{port("UDP", 53)}},
			}}),
	)
	c := NewCalculator(in)
	ip := netip.MustParseAddr
	cases := []struct {
		name    string
		pkt     Packet
		allowed bool
		reason  string
	}{
		{"ingress named port resolves on the destination pod: web's http is 8080",
			Packet{ip("10.0.1.3"), ip("10.0.1.1"), "TCP", 8080}, true,
			"allowed: egress from prod/api: no policy selects it; ingress to prod/web: allowed by prod/web-in spec.ingress[0]"},
		{"api's own http port means nothing at web",
			Packet{ip("10.0.1.3"), ip("10.0.1.1"), "TCP", 80}, false,
			"denied: ingress to prod/web: selected by prod/web-in, no rule allows"},
		{"a source outside the peers",
			Packet{ip("10.0.1.2"), ip("10.0.1.1"), "TCP", 8080}, false,
			"denied: ingress to prod/web: selected by prod/web-in, no rule allows"},
		{"egress named port resolves on each destination: dev/web's http is 8081",
			Packet{ip("10.0.1.1"), ip("10.0.2.1"), "tcp", 8081}, true,
			"allowed: egress from prod/web: allowed by prod/web-out spec.egress[0]; ingress to dev/web: no policy selects it"},
		{"egress named port of a destination outside the peers",
			Packet{ip("10.0.1.1"), ip("10.0.1.3"), "TCP", 80}, false,
			"denied: egress from prod/web: selected by prod/web-out, no rule allows"},
		{"egress to an ipBlock except",
			Packet{ip("10.0.1.1"), ip("10.9.9.9"), "UDP", 53}, false,
			"denied: egress from prod/web: selected by prod/web-out, no rule allows"},
		{"egress to the ipBlock",
			Packet{ip("10.0.1.1"), ip("8.8.8.8"), "UDP", 53}, true,
			"allowed: egress from prod/web: allowed by prod/web-out spec.egress[1]; ingress to 8.8.8.8: not a pod-network pod, not policed"},
		{"both ends deny",
			Packet{ip("10.0.1.1"), ip("10.0.1.1"), "ICMP", 0}, false,
			"denied: egress from prod/web: selected by prod/web-out, no rule allows; ingress to prod/web: selected by prod/web-in, no rule allows"},
		{"a host-network pod is no pod to police",
			Packet{ip("192.168.0.10"), ip("10.0.1.2"), "TCP", 1}, true,
			"allowed: egress from 192.168.0.10: not a pod-network pod, not policed; ingress to prod/db: no policy selects it"},
	}
	for _, tc := range cases {
		d := c.Verdict(tc.pkt)
		if d.Allowed != tc.allowed || d.Reason != tc.reason {
			t.Errorf("%s: got %v %q,\n want %v %q", tc.name, d.Allowed, d.Reason, tc.allowed, tc.reason)
		}
	}
	d := Verdict(in, Packet{ip("10.0.1.3"), ip("10.0.1.1"), "TCP", 8080})
	want := &RuleRef{Policy: Key{Namespace: "prod", Name: "web-in"}, Rule: 0}
	if d.Egress.Pod == nil || *d.Egress.Pod != podAPI.Key || !reflect.DeepEqual(d.Ingress.AllowedBy, want) ||
		!reflect.DeepEqual(d.Ingress.Policies, []Key{{Namespace: "prod", Name: "web-in"}}) {
		t.Errorf("sides: %+v", d)
	}
}
