package webview_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/ui"
	"github.com/tabbynet/tabby/ui/uifake"

	"github.com/tabbynet/tabby/hack/webview"
)

// Bounds for what the page shows: flows arrive by push, the mesh by a 3 s poll; the slack is
// for a loaded machine.
const (
	flowWithin    = 15 * time.Second
	sessionWithin = 30 * time.Second
)

// mesh is three nodes in a full mesh, each also peering with a ToR; sessions[from|to] overrides
// a session's state, and a node in silent does not answer.
func mesh(sessions map[string]string, silent ...string) []status.NodeReply {
	nodes := []string{"node-1", "node-2", "node-3"}
	var out []status.NodeReply
	for i, n := range nodes {
		if slices.Contains(silent, n) {
			out = append(out, status.NodeReply{Node: n, Err: "dial " + n + ": connection refused"})
			continue
		}
		r := &status.PeersReply{Node: n, RouterID: fmt.Sprintf("198.51.100.%d", 11+i), ASN: 64512, RoutesAdvertised: 1, RoutesLearned: 3}
		for j, p := range nodes {
			if p == n {
				continue
			}
			state := "established"
			if s, ok := sessions[n+"|"+p]; ok {
				state = s
			}
			r.Peers = append(r.Peers, status.PeerStatus{Address: fmt.Sprintf("198.51.100.%d", 11+j), ASN: 64512, Type: "mesh", Node: p, Source: "mesh",
				State: state, RoutesReceived: 1, RoutesAccepted: 1, RoutesSent: 2,
				Families: []status.FamilyRoutes{{Family: "ipv4", State: status.FamilyUp, Received: 1, Accepted: 1, Sent: 2}}})
		}
		r.Peers = append(r.Peers, status.PeerStatus{Address: "203.0.113.1", ASN: 64513, Type: "global", Source: "bgppeer/tor", State: "established", BFD: "up",
			RoutesReceived: 1, RoutesAccepted: 1, RoutesSent: 3})
		out = append(out, status.NodeReply{Node: n, Reply: r})
	}
	return out
}

func record(verdict flow.Verdict, src, dst, rule string) flow.Record {
	ns, pod, _ := strings.Cut(src, "/")
	dns, dpod, _ := strings.Cut(dst, "/")
	now := time.Now()
	return flow.Record{Start: now.Add(-5 * time.Second), End: now, Node: "node-2",
		Src:      flow.Endpoint{Namespace: ns, Pod: pod, IP: netip.MustParseAddr("10.244.0.5")},
		Dst:      flow.Endpoint{Namespace: dns, Pod: dpod, IP: netip.MustParseAddr("10.244.1.7")},
		Protocol: "TCP", DstPort: 8080, Verdict: verdict, Direction: "ingress", Rule: rule, Connections: 1, Packets: 3, Bytes: 180}
}

// TestPageWithFakeBackend: the page in Chromium against the handler over a fake backend shows a
// denied flow pushed by the test with its rule, highlighted; filters by verdict; draws every node
// and the ToR; shows a session going from established to active, and a node that stops answering.
func TestPageWithFakeBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a real browser (skipped under -short)")
	}
	b := &uifake.Backend{}
	b.SetBGP(mesh(nil), nil)
	b.Push(record(flow.Allow, "demo/client", "demo/web", "NetworkPolicy demo/allow-web ingress rule 0 (Allow)"))
	srv := httptest.NewServer(ui.NewHandler(b, ui.Options{}))
	t.Cleanup(srv.Close) // after the browser's cleanup: its flow stream holds a connection open
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := webview.Open(t, ctx, srv.URL+"/")

	// Every node and the ToR, every session established with its routes.
	p.Until("three nodes and the ToR, 9 session ends established", sessionWithin, func() (bool, error) {
		g, err := p.Graph()
		want := []string{"node-1", "node-2", "node-3", "peer/203.0.113.1"}
		up := 0
		for _, s := range g.Sessions {
			if s == "established" {
				up++
			}
		}
		return slices.Equal(g.Nodes, want) && up == 9 && g.Labels["node-1|node-2"] == "1/1↓ 2↑", err
	})

	// A denied flow pushed now shows with its rule, highlighted; the allowed one is not.
	const rule = "NetworkPolicy demo/deny-db ingress (no rule matched)"
	pushed := time.Now()
	b.Push(record(flow.Deny, "demo/client", "demo/db", rule))
	var denied webview.FlowRow
	p.Until("the denied flow with its rule", flowWithin, func() (bool, error) {
		rows, err := p.Flows()
		for _, r := range rows {
			if r.Verdict == "deny" && r.From == "demo/client" && r.To == "demo/db" {
				denied = r
				return true, err
			}
		}
		return false, err
	})
	t.Logf("denied flow shown %v after the push", time.Since(pushed).Round(time.Millisecond))
	if denied.Rule != rule || !denied.Highlighted {
		t.Errorf("denied flow row %+v: want rule %q, highlighted", denied, rule)
	}
	rows, err := p.Flows()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Verdict == "allow" && r.Highlighted {
			t.Errorf("allowed flow highlighted: %+v", r)
		}
	}
	p.Screenshot("fake-backend")

	// verdict=deny: the allowed flow goes, the denied stays.
	if err := p.SetFilter("verdict", "deny"); err != nil {
		t.Fatal(err)
	}
	p.Until("only denied flows with verdict=deny", flowWithin, func() (bool, error) {
		rows, err := p.Flows()
		return len(rows) == 1 && rows[0].Verdict == "deny", err
	})

	// A filter that can match nothing is refused, and the page says which field and why.
	if err := p.SetFilter("to", "/db"); err != nil {
		t.Fatal(err)
	}
	p.Until("the refused filter named", flowWithin, func() (bool, error) {
		s, err := p.FlowStatus()
		return strings.Contains(s, `to: Invalid value: "/db"`), err
	})

	// node-1's session to node-2 falls to active (node-2 sees it too), then node-3 goes silent.
	b.SetBGP(mesh(map[string]string{"node-1|node-2": "active", "node-2|node-1": "active"}), nil)
	p.Until("the node-1 – node-2 session active", sessionWithin, func() (bool, error) {
		g, err := p.Graph()
		return g.Sessions["node-1|node-2"] == "active" && g.Labels["node-1|node-2"] == "active" && g.Sessions["node-1|node-3"] == "established", err
	})
	b.SetBGP(mesh(map[string]string{"node-1|node-3": "active", "node-2|node-3": "active"}, "node-3"), nil)
	p.Until("node-3 not answering, still drawn", sessionWithin, func() (bool, error) {
		g, err := p.Graph()
		return slices.Contains(g.Nodes, "node-3") && strings.Contains(g.Status, "1 not answering") &&
			g.Sessions["node-1|node-2"] == "established" && g.Sessions["node-1|node-3"] == "active", err
	})
	p.Screenshot("fake-backend-node-3-silent")
}
