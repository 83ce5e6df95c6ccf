package tabbyctl

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/flow"
)

// Bad flags are refused before any cluster is asked, naming the flag and the value.
func TestFlowsFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--verdict", "drop"}, `--verdict: Unsupported value: "drop": supported values: allow, deny`},
		{[]string{"--from", "client"}, `--from: Invalid value: "client": want NAMESPACE/POD, NAMESPACE/ or an IP address`},
		{[]string{"--to", "10.244.0"}, `--to: Invalid value: "10.244.0"`},
		{[]string{"-o", "yaml"}, `-o: Unsupported value: "yaml": supported values: text, json`},
		{[]string{"extra"}, `unknown command "extra"`},
	} {
		var out, errb bytes.Buffer
		code := Main(append([]string{"flows", "--kubeconfig", "/nonexistent"}, tc.args...), Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
		if code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("flows %v: exit %d, stderr %q; want %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

func TestFlowLine(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 30, 1, 123e6, time.UTC)
	pod := func(ns, name, ip string) flow.Endpoint {
		return flow.Endpoint{Namespace: ns, Pod: name, IP: netip.MustParseAddr(ip)}
	}
	for _, tc := range []struct {
		r    flow.Record
		want string
	}{
		{flow.Record{Start: start, Node: "node-2", Src: pod("demo", "client", "10.244.1.5"), Dst: pod("demo", "server", "10.244.2.3"), Protocol: "TCP", DstPort: 80,
			Verdict: flow.Deny, Rule: "NetworkPolicy demo/deny-all ingress (no rule matched)", Connections: 1},
			"Nov 28 10:30:01.123  node-2  demo/client -> demo/server:80/TCP  DENIED  NetworkPolicy demo/deny-all ingress (no rule matched)"},
		{flow.Record{Start: start, Node: "node-1", Src: pod("demo", "client", "fd00:10:244::5"), Dst: flow.Endpoint{IP: netip.MustParseAddr("2001:db8::9")}, Protocol: "UDP", DstPort: 53,
			Verdict: flow.Allow, Rule: "no policy", Connections: 4},
			"Nov 28 10:30:01.123  node-1  demo/client -> [2001:db8::9]:53/UDP  ALLOWED  no policy  (4 connections)"},
		{flow.Record{Start: start, Node: "node-1", Src: flow.Endpoint{IP: netip.MustParseAddr("203.0.113.100")}, Dst: pod("demo", "server", "10.244.2.3"), Protocol: "ICMP",
			Verdict: flow.Allow, Rule: "no policy"},
			"Nov 28 10:30:01.123  node-1  203.0.113.100 -> demo/server ICMP  ALLOWED  no policy"},
	} {
		if got := flowLine(tc.r, time.UTC); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
