package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	observeclient "github.com/tabbynet/tabby/observe/client"
	"github.com/tabbynet/tabby/ui"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/webview"
)

// TestWebView is issue #40's acceptance of the web view, in headless Chromium against a 3-node
// lab with flow logs on, through the cluster-wide reader tabbyctl ui uses: a connection denied
// by a NetworkPolicy shows in the flow log with the policy that denied it, highlighted; the graph
// draws every node with its sessions established; a node whose tabby-node dies shows as not
// answering, and its peers' sessions to it as down. The page's screenshot is docs/ui.png.
func TestWebView(t *testing.T) {
	l := startLab(t, lab.Options{FlowLogs: true})
	ctx := testCtx(t, 5*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(3)...)
	for _, n := range nodes {
		if err := n.WaitPeers(ctx, 30*time.Second, peersExcept(nodes, n)...); err != nil {
			t.Fatal(err)
		}
	}
	web, frontend, batch := shopPolicy(t, ctx, l, nodes[0], nodes[1], nodes[2])
	webAddr := netip.AddrPortFrom(web.IP, 80)
	err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		if err := lab.Probe(ctx, frontend.NS, webAddr, corev1.ProtocolTCP, probeTimeout); err != nil {
			return fmt.Errorf("frontend -> web: %w", err)
		}
		if lab.Probe(ctx, batch.NS, webAddr, corev1.ProtocolTCP, probeTimeout) == nil {
			return fmt.Errorf("batch -> web answered")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("policy not enforced: %v", err)
	}

	backend, err := observeclient.New(ctx, l.Config, observeclient.Options{CAFile: l.ObserveCA(), OnNodeError: func(node string, err error) { t.Logf("node %s: %v", node, err) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.NewHandler(backend, ui.Options{}))
	t.Cleanup(srv.Close) // after the browser's cleanup: its flow stream holds a connection open
	p := webview.Open(t, ctx, srv.URL+"/")

	// Every node, every session established.
	names := []string{"node-1", "node-2", "node-3"}
	p.Until("the three nodes, their 6 session ends established", 60*time.Second, func() (bool, error) {
		g, err := p.Graph()
		up := 0
		for _, s := range g.Sessions {
			if s == "established" {
				up++
			}
		}
		return slices.Equal(g.Nodes, names) && up == 6, err
	})

	// A connection the policy denies, made now, shows with the rule, highlighted; an allowed one
	// shows too, not highlighted. Connections go on while the page is watched, as an operator's
	// would: the first may be made before felix's flow log follows the new policy.
	const rule = "NetworkPolicy shop/web-from-frontend ingress (no rule matched)"
	made := time.Now()
	var last time.Time
	connect := func() {
		if time.Since(last) < 2*time.Second {
			return
		}
		last = time.Now()
		if err := lab.Probe(ctx, frontend.NS, webAddr, corev1.ProtocolTCP, probeTimeout); err != nil {
			t.Errorf("frontend -> web: %v", err)
		}
		if lab.Probe(ctx, batch.NS, webAddr, corev1.ProtocolTCP, probeTimeout) == nil {
			t.Errorf("batch -> web answered under the policy")
		}
	}
	var denied webview.FlowRow
	p.Until("the denied connection batch -> web with its rule", 60*time.Second, func() (bool, error) {
		connect()
		rows, err := p.Flows()
		for _, r := range rows {
			if r.Verdict == "deny" && r.From == "shop/batch" && r.To == "shop/web" {
				denied = r
				return true, err
			}
		}
		return false, err
	})
	t.Logf("denied flow shown %v after the connection; row: %s", time.Since(made).Round(time.Millisecond), denied.Text)
	if denied.Rule != rule || !denied.Highlighted {
		t.Errorf("denied flow %+v: want rule %q, highlighted", denied, rule)
	}
	p.Until("the allowed connection frontend -> web", 60*time.Second, func() (bool, error) {
		connect()
		rows, err := p.Flows()
		return slices.ContainsFunc(rows, func(r webview.FlowRow) bool {
			return r.Verdict == "allow" && r.From == "shop/frontend" && r.To == "shop/web" && !r.Highlighted
		}), err
	})
	p.Screenshot("lab")

	// node-3's tabby-node dies: node-1's and node-2's sessions to it go down, node-3 stays
	// drawn, not answering.
	if err := nodes[2].Kill(); err != nil {
		t.Fatal(err)
	}
	p.Until("node-3 not answering, the sessions to it down", 60*time.Second, func() (bool, error) {
		g, err := p.Graph()
		down := func(k string) bool { s, ok := g.Sessions[k]; return ok && s != "established" }
		return slices.Contains(g.Nodes, "node-3") && strings.Contains(g.Status, "1 not answering") &&
			down("node-1|node-3") && down("node-2|node-3") && g.Sessions["node-1|node-2"] == "established", err
	})
	p.Screenshot("lab-node-3-killed")
}
