package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/netpol"
)

// TestPolicyTabbyctl: what `tabbyctl policy show` says of a pod is what the node enforces, and
// `tabbyctl policy check` finds the node's chains and sets equal to what the API objects call
// for, then names each thing an operator (or a foreign tool) changed behind felix's back: a rule
// taken out of a pod's chain, a member taken out of a set, the jump from FORWARD.
func TestPolicyTabbyctl(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 4*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(2)...)
	web, frontend, batch := shopPolicy(t, ctx, l, nodes[0], nodes[1], nodes[1])
	err := lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		if err := lab.Probe(ctx, frontend.NS, netip.AddrPortFrom(web.IP, 80), corev1.ProtocolTCP, probeTimeout); err != nil {
			return fmt.Errorf("frontend -> web: %w", err)
		}
		if lab.Probe(ctx, batch.NS, netip.AddrPortFrom(web.IP, 80), corev1.ProtocolTCP, probeTimeout) == nil {
			return fmt.Errorf("batch -> web answered")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("policy not enforced: %v", err)
	}

	out, err := l.Tabbyctl(ctx, "policy", "show", "shop/web")
	t.Logf("tabbyctl policy show shop/web:\n%s", out)
	if err != nil || !strings.Contains(out, "ingress: isolated, allowed only what these allow: shop/web-from-frontend") || !strings.Contains(out, "egress:  open") {
		t.Fatalf("policy show: %v\n%s", err, out)
	}
	out, err = l.Tabbyctl(ctx, "policy", "show", "shop/web", "--from", "shop/frontend", "--port", "80")
	t.Logf("--from shop/frontend --port 80:\n%s", out)
	if err != nil || !strings.Contains(out, ": allowed") || !strings.Contains(out, "shop/web-from-frontend") {
		t.Fatalf("frontend -> web: %v\n%s", err, out)
	}
	out, err = l.Tabbyctl(ctx, "policy", "show", "shop/web", "--from", "shop/batch", "--port", "80/TCP")
	t.Logf("--from shop/batch --port 80/TCP:\n%s", out)
	if err == nil || !strings.Contains(out, ": denied") {
		t.Fatalf("batch -> web: want denied and exit status 1, got %v\n%s", err, out)
	}
	if out, err = l.Tabbyctl(ctx, "policy", "show", "shop/web", "--from", "shop/batch", "--port", "80/ICMP"); err == nil || !strings.Contains(out, `--port: Unsupported value: "ICMP"`) {
		t.Fatalf("a bad --port must be refused by name: %v\n%s", err, out)
	}

	n1 := nodes[0]
	check := func() (string, error) {
		// The namespace by the name `ip netns list` prints, as the demo shows the command.
		return l.Tabbyctl(ctx, "policy", "check", "--node", n1.Name, "--netns", n1.NS)
	}
	err = lab.Eventually(ctx, 20*time.Second, func(context.Context) error {
		out, err := check()
		if err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("policy check of a node in sync: %v", err)
	}
	out, _ = check()
	t.Logf("tabbyctl policy check, node in sync:\n%s", out)

	// Tamper behind felix's back (it repairs at its next resync, long after this test).
	chain := "tabby-tw-" + hostVeth(t, ctx, n1, web)
	set := ""
	saved, err := n1.Exec(ctx, "ipset", "list", "-n")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range strings.Fields(saved) {
		if strings.HasPrefix(s, "tabby-p4-") {
			set = s
		}
	}
	for _, cmd := range [][]string{
		{"iptables", "-t", "filter", "-D", chain, "1"},
		{"ipset", "del", set, frontend.IP.String()},
		{"iptables", "-t", "filter", "-D", "FORWARD", "-j", "tabby-FORWARD"},
	} {
		if out, err := n1.Exec(ctx, cmd...); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, out)
		}
	}
	out, err = check()
	t.Logf("tabbyctl policy check after tampering:\n%s", out)
	for _, want := range []string{"chain differs: IPv4: " + chain + ": missing", "set differs: IPv4: " + set + ": missing \"" + frontend.IP.String() + "\"", "jump missing: IPv4: FORWARD", "3 problems"} {
		if !strings.Contains(out, want) {
			t.Errorf("policy check output lacks %q", want)
		}
	}
	if err == nil {
		t.Errorf("policy check with differences exited 0")
	}
}

// hostVeth is the host side of pod p's veth on node n: its chains' suffix.
func hostVeth(t *testing.T, ctx context.Context, n *lab.Node, p *lab.Pod) string {
	t.Helper()
	out, err := n.Exec(ctx, "ip", "-o", "route", "get", p.IP.String())
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	for i := range f[:len(f)-1] {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	t.Fatalf("no device in %q", out)
	return ""
}

// shopPolicy is the scenario the tabbyctl and flow log tests share: in namespace shop, web on
// webNode serves port 80, frontend and batch are clients; once all three reach each other, the
// NetworkPolicy web-from-frontend lets only frontend reach web.
func shopPolicy(t *testing.T, ctx context.Context, l *lab.Lab, webNode, frontendNode, batchNode *lab.Node) (web, frontend, batch *lab.Pod) {
	t.Helper()
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
	if err := l.EnsureNamespace(ctx, "shop", map[string]string{"team": "shop"}); err != nil {
		t.Fatal(err)
	}
	spec := func(name string, node *lab.Node) lab.PodSpec {
		return lab.PodSpec{Name: name, Namespace: "shop", Node: node.Name, Labels: map[string]string{"app": name}, Ports: ports, Serve: true}
	}
	pods, err := l.AddPods(ctx, spec("web", webNode), spec("frontend", frontendNode), spec("batch", batchNode))
	if err != nil {
		t.Fatal(err)
	}
	requireReach(t, ctx, "pod to pod", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
	np := netpol.Policy("shop", "web-from-frontend", netpol.Labels("app", "web")).
		Ingress(netpol.From(netpol.Pods(netpol.Labels("app", "frontend"))).On(netpol.TCP(80))).P()
	if _, err := l.Kube.NetworkingV1().NetworkPolicies("shop").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pods[0], pods[1], pods[2]
}
