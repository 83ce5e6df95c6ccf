package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/observe"
	observeclient "github.com/tabbynet/tabby/observe/client"
)

// TestFlows: a connection a NetworkPolicy denies shows in `tabbyctl flows --verdict deny`, with
// the rule that denied it, within seconds, also to a follower; every node answers for its BGP
// status; the nodes' endpoint refuses a request without a token (401) and a token RBAC does
// not allow (403), and says so when flow logs are turned off.
func TestFlows(t *testing.T) {
	l := startLab(t, lab.Options{FlowLogs: true})
	ctx := testCtx(t, 5*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(2)...)
	web, frontend, batch := shopPolicy(t, ctx, l, nodes[0], nodes[1], nodes[1])
	toWeb := netip.AddrPortFrom(web.IP, 80)
	if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		if err := lab.Probe(ctx, frontend.NS, toWeb, corev1.ProtocolTCP, probeTimeout); err != nil {
			return fmt.Errorf("frontend -> web: %w", err)
		}
		if lab.Probe(ctx, batch.NS, toWeb, corev1.ProtocolTCP, probeTimeout) == nil {
			return fmt.Errorf("batch -> web answered")
		}
		return nil
	}); err != nil {
		t.Fatalf("policy not enforced: %v", err)
	}

	// A follower started before the next attempt sees it as it is recorded.
	follow, lines := startFollow(t, ctx, l, "--verdict", "deny", "--follow", "--from", "shop/batch", "-o", "json")
	const rule = "NetworkPolicy shop/web-from-frontend ingress (no rule matched)"
	wantLine := "shop/batch -> shop/web:80/TCP  DENIED  " + rule
	start := time.Now()
	var found flow.Record
	if err := lab.Eventually(ctx, 60*time.Second, func(ctx context.Context) error {
		_ = lab.Probe(ctx, batch.NS, toWeb, corev1.ProtocolTCP, probeTimeout) // a new denied connection
		out, err := l.Tabbyctl(ctx, "flows", "--verdict", "deny", "-o", "json")
		if err != nil {
			return fmt.Errorf("tabbyctl flows: %v\n%s", err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r flow.Record
			if json.Unmarshal([]byte(line), &r) == nil && r.Src.String() == "shop/batch" && r.Dst.String() == "shop/web" {
				found = r
				return nil
			}
		}
		return fmt.Errorf("no denied flow shop/batch -> shop/web yet:\n%s", out)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the denied flow in tabbyctl flows after %s: %+v", time.Since(start).Round(time.Millisecond), found)
	if found.Verdict != flow.Deny || found.DstPort != 80 || found.Protocol != "TCP" || found.Rule != rule || found.Node != web.Node.Name || found.Direction != "ingress" {
		t.Errorf("denied flow: %+v; want TCP/80 denied on %s by %q", found, web.Node.Name, rule)
	}
	out, err := l.Tabbyctl(ctx, "flows", "--verdict", "deny", "--to", "shop/web")
	t.Logf("tabbyctl flows --verdict deny --to shop/web:\n%s", out)
	if err != nil || !strings.Contains(out, wantLine) {
		t.Errorf("text output lacks %q: %v", wantLine, err)
	}
	if out, err := l.Tabbyctl(ctx, "flows", "--verdict", "allow", "--from", "shop/batch", "--to", "shop/web"); err != nil || strings.Contains(out, "DENIED") {
		t.Errorf("--verdict allow shows a denied flow: %v\n%s", err, out)
	}
	// The follower printed what the node kept; a new attempt reaches it as the node records it.
	mark := time.Now()
	_ = lab.Probe(ctx, batch.NS, toWeb, corev1.ProtocolTCP, probeTimeout)
	for live := false; !live; {
		select {
		case line := <-lines:
			var r flow.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("tabbyctl flows --follow -o json: %q: %v", line, err)
			}
			if r.Src.String() != "shop/batch" || r.Verdict != flow.Deny || r.Rule != rule {
				t.Errorf("the follower of shop/batch's denies got %+v", r)
			}
			if live = r.End.After(mark); live {
				t.Logf("tabbyctl flows --follow: a new denied connection after %s: %s", time.Since(mark).Round(time.Millisecond), line)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the follower printed no new denied flow; stderr:\n%s", follow.stderr())
		}
	}

	// Every node's BGP status through the same endpoint, with the CA from the lab's Secret.
	c, err := observeclient.New(ctx, l.Config, observeclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	replies, err := c.BGP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range replies {
		if r.Err != "" || r.Reply == nil || len(r.Reply.Peers) != 1 || r.Reply.Peers[0].State != "established" {
			t.Errorf("BGP of %s: %+v (error %q)", r.Node, r.Reply, r.Err)
		}
	}

	// Refusals, straight to a node's endpoint.
	get := func(token string) (int, string) {
		t.Helper()
		pem, err := os.ReadFile(l.ObserveCA())
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: observe.ServerName}}}
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+nodes[0].ObserveAddr+observe.FlowsPath, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != http.StatusUnauthorized || !strings.Contains(body, "a bearer token is required") {
		t.Errorf("no token: %d %q", code, body)
	}
	if code, body := get("not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("a token the API server does not know: %d %q", code, body)
	}
	if _, err := l.Kube.CoreV1().ServiceAccounts("shop").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nosy"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := l.Kube.CoreV1().ServiceAccounts("shop").CreateToken(ctx, "nosy", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(tr.Status.Token); code != http.StatusForbidden || !strings.Contains(body, `"system:serviceaccount:shop:nosy" cannot get flows`) {
		t.Errorf("a token without the right: %d %q", code, body)
	}

	// Flow logs off: each node says how to turn them on.
	if err := l.SetFlowLogs(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		out, err := l.Tabbyctl(ctx, "flows")
		if err == nil || !strings.Contains(out, "FelixConfiguration flowLogs.enabled") {
			return fmt.Errorf("tabbyctl flows with flow logs off: %v\n%s", err, out)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// follower is a running `tabbyctl flows --follow`.
type follower struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	err strings.Builder
}

func (f *follower) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err.Write(b)
}

func (f *follower) stderr() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err.String()
}

// startFollow runs tabbyctl flows with args and hands over its lines; it is stopped with the
// test.
func startFollow(t *testing.T, ctx context.Context, l *lab.Lab, args ...string) (*follower, <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	f := &follower{cmd: exec.CommandContext(ctx, filepath.Join(l.TabbyBin, "tabbyctl"), append([]string{"--kubeconfig", l.Kubecfg, "flows"}, args...)...)}
	f.cmd.Stderr = f
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = f.cmd.Wait()
	})
	return f, lines
}
