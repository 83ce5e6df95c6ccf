package felix

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/internal/nstest"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// flowLogsUpdate is the FelixConfiguration turning flow logs on (1s intervals) or off.
func flowLogsUpdate(on bool) model.FelixConfigurationUpdate {
	return model.FelixConfigurationUpdate{Config: &v1.FelixConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultFelixConfigurationName},
		Spec: v1.FelixConfigurationSpec{FlowLogs: &v1.FlowLogsSpec{
			Enabled: on, FlushInterval: &metav1.Duration{Duration: time.Second}}},
	}}
}

// netfilterSockets counts this process's NETLINK_NETFILTER sockets in namespace n: the flow
// log's NFLOG and conntrack subscriptions (iptables' own sockets are another process's).
func netfilterSockets(t *testing.T, n *nstest.NS) int {
	t.Helper()
	var table string
	if err := n.Enter(func() error {
		b, err := os.ReadFile("/proc/thread-self/net/netlink")
		table = string(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mine := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				mine[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	count := 0
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		// sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode; NETLINK_NETFILTER is 12.
		if len(f) >= 10 && f[1] == "12" && mine[f[9]] {
			count++
		}
	}
	return count
}

func iptablesSave(t *testing.T, n *nstest.NS) string {
	t.Helper()
	return n.Exec(t, "iptables-save", "-t", "filter") + n.Exec(t, "ip6tables-save", "-t", "filter")
}

// Flow logs in a real node namespace, through felix as tabby-node runs it: off, neither NFLOG
// rules nor subscriptions; on, a connection a NetworkPolicy denies, one an AdminNetworkPolicy
// denies and one a NetworkPolicy allows each appear, in both families, with their pods, port,
// protocol and the rule as `tabbyctl policy show` names it; off again, both gone.
func TestFlowLogsInNetns(t *testing.T) {
	nstest.Require(t)
	node := nstest.New(t)
	node.Exec(t, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	node.Exec(t, "ip", "link", "add", "up0", "type", "veth", "peer", "name", "up0-peer")
	node.Exec(t, "ip", "link", "set", "up0", "up")
	f, err := New(Config{NodeName: "node-1", UplinkInterface: ipfamily.PairOf("up0", ""), NetNSPath: node.Path()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		f.Close()
	})

	pods := map[string]*labPod{}
	ips := map[policy.Key][]netip.Addr{}
	for i, name := range []string{"cli/client", "srv/server", "srv/db", "srv/admin"} {
		p := newLabPod(t, node, name, i+1)
		pods[p.key.Name] = p
		ips[p.key] = []netip.Addr{p.ips.Get(ipfamily.IPv4), p.ips.Get(ipfamily.IPv6)}
		f.OnUpdate(PodUpdate{Pod: &policy.Pod{Key: p.key, Labels: map[string]string{"app": p.key.Name}}})
		f.OnUpdate(model.WorkloadUpdate{Workload: model.Workload{Pod: p.key, Interface: p.iface}})
	}
	for _, ns := range []string{"cli", "srv"} {
		f.OnUpdate(NamespaceUpdate{Namespace: policy.Namespace{Name: ns}})
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	fromCli := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "cli"}}}}
	f.OnUpdate(NetworkPolicyUpdate{Policy: &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "srv", Name: "web", ResourceVersion: "1"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: fromCli, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}},
	}})
	f.OnUpdate(NetworkPolicyUpdate{Policy: &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "srv", Name: "db-deny", ResourceVersion: "1"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}})
	f.OnUpdate(AdminPolicyUpdate{Policy: policy.FromANP(&anpv1alpha1.AdminNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "block-admin"},
		Spec: anpv1alpha1.AdminNetworkPolicySpec{Priority: 10,
			Subject: anpv1alpha1.AdminNetworkPolicySubject{Pods: &anpv1alpha1.NamespacedPod{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "srv"}},
				PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "admin"}}}},
			Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{{Name: "deny-cli", Action: anpv1alpha1.AdminNetworkPolicyRuleActionDeny,
				From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "cli"}}}}}}},
	})})
	f.OnUpdate(PodIPsUpdate{IPs: ips})
	f.OnUpdate(PolicyInSync{})
	f.OnUpdate(flowLogsUpdate(false))
	for _, name := range []string{"server", "db", "admin"} {
		for _, fam := range ipfamily.All {
			serve(t, pods[name].ns, netip.AddrPortFrom(pods[name].ips.Get(fam), 8080))
		}
	}
	client := pods["client"].ns
	to := func(name string, fam ipfamily.Family) netip.AddrPort {
		return netip.AddrPortFrom(pods[name].ips.Get(fam), 8080)
	}

	// Off: policy in force, no NFLOG rule, no subscription.
	waitUntil(t, 30*time.Second, "policy in force", func() bool {
		return strings.Contains(iptablesSave(t, node), "-A "+policy.ToWorkloadPrefix)
	})
	connect(t, "off: allowed", client, to("server", ipfamily.IPv4), true)
	if s := iptablesSave(t, node); strings.Contains(s, "NFLOG") {
		t.Fatalf("flow logs off, NFLOG rules in the filter table:\n%s", s)
	}
	if n := netfilterSockets(t, node); n != 0 {
		t.Fatalf("flow logs off, %d netfilter netlink sockets open", n)
	}
	if v, err := node.Output("sysctl", "-n", "net.netfilter.nf_conntrack_acct"); err != nil || strings.TrimSpace(v) != "0" {
		t.Fatalf("conntrack accounting %q (%v) with flow logs off", v, err)
	}

	f.OnUpdate(flowLogsUpdate(true))
	waitUntil(t, 30*time.Second, "NFLOG rules and subscriptions", func() bool {
		return strings.Contains(iptablesSave(t, node), "--nflog-group 40") && netfilterSockets(t, node) == 2
	})
	if v, err := node.Output("sysctl", "-n", "net.netfilter.nf_conntrack_acct"); err != nil || strings.TrimSpace(v) != "1" {
		t.Fatalf("conntrack accounting %q (%v), want 1 with flow logs on", v, err)
	}

	for _, fam := range ipfamily.All {
		connect(t, "allowed "+fam.String(), client, to("server", fam), true)
		connect(t, "NetworkPolicy deny "+fam.String(), client, to("db", fam), false)
		connect(t, "AdminNetworkPolicy deny "+fam.String(), client, to("admin", fam), false)
	}
	type want struct {
		dst     string
		verdict flow.Verdict
		rule    string
	}
	wants := []want{
		{"server", flow.Allow, "NetworkPolicy srv/web ingress rule 0 (Allow)"},
		{"db", flow.Deny, "NetworkPolicy srv/db-deny ingress (no rule matched)"},
		{"admin", flow.Deny, `AdminNetworkPolicy block-admin ingress rule 0 "deny-cli" (Deny)`},
	}
	var last []flow.Record
	waitUntil(t, 60*time.Second, "flow records of every connection", func() bool {
		last = nil
		_ = f.FlowLog().Flows(context.Background(), flow.Filter{From: "cli/client"}, false, func(r flow.Record) error {
			last = append(last, r)
			return nil
		})
		for _, w := range wants {
			for _, fam := range ipfamily.All {
				if !hasRecord(last, w.dst, fam, w.verdict, w.rule) {
					return false
				}
			}
		}
		return true
	})
	for _, r := range last {
		if r.Node != "node-1" || r.Src.Pod != "client" || r.Dst.Namespace != "srv" || r.Direction != "ingress" {
			t.Errorf("record %+v", r)
		}
	}
	t.Logf("records: %+v", last)

	// A follower gets a new record as its interval closes (after the ones kept).
	fctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	got := make(chan flow.Record, 1000)
	go func() {
		_ = f.FlowLog().Flows(fctx, flow.Filter{Verdict: flow.Deny, To: "srv/db"}, true, func(r flow.Record) error {
			got <- r
			return nil
		})
	}()
	start := time.Now()
	connect(t, "NetworkPolicy deny, followed", client, to("db", ipfamily.IPv4), false)
	for followed := false; !followed; {
		select {
		case r := <-got:
			followed = !r.End.Before(start)
		case <-fctx.Done():
			t.Fatal("no new deny record followed within 60s")
		}
	}

	// Turned off and on while connections are logged: each change takes effect (a capture
	// that hung on stopping would hold up felix's loop, and this with it).
	stopTraffic := make(chan struct{})
	trafficDone := make(chan struct{})
	go func() {
		defer close(trafficDone)
		for {
			select {
			case <-stopTraffic:
				return
			default:
			}
			if c, err := dialIn(client, to("server", ipfamily.IPv4), time.Second); err == nil {
				c.Close()
			}
			_, _ = dialIn(client, to("db", ipfamily.IPv4), 50*time.Millisecond)
		}
	}()
	for i := range 3 {
		for _, on := range []bool{false, true} {
			f.OnUpdate(flowLogsUpdate(on))
			want := 0
			if on {
				want = 2
			}
			waitUntil(t, 30*time.Second, fmt.Sprintf("round %d: flow logs %v", i, on), func() bool {
				return strings.Contains(iptablesSave(t, node), "NFLOG") == on && netfilterSockets(t, node) == want
			})
		}
	}
	close(stopTraffic)
	<-trafficDone

	f.OnUpdate(flowLogsUpdate(false))
	waitUntil(t, 30*time.Second, "NFLOG rules and subscriptions gone", func() bool {
		return !strings.Contains(iptablesSave(t, node), "NFLOG") && netfilterSockets(t, node) == 0
	})
	if v, err := node.Output("sysctl", "-n", "net.netfilter.nf_conntrack_acct"); err != nil || strings.TrimSpace(v) != "0" {
		t.Errorf("conntrack accounting %q (%v) with flow logs off again, want 0 as before", v, err)
	}
	// What was recorded stays readable.
	n := 0
	_ = f.FlowLog().Flows(context.Background(), flow.Filter{}, false, func(flow.Record) error { n++; return nil })
	if n == 0 {
		t.Fatal("records gone with flow logs off")
	}
}

func hasRecord(rs []flow.Record, dst string, fam ipfamily.Family, v flow.Verdict, rule string) bool {
	for _, r := range rs {
		if r.Dst.Pod != dst || ipfamily.OfAddr(r.Dst.IP) != fam || r.Verdict != v || r.Rule != rule ||
			r.Protocol != "TCP" || r.DstPort != 8080 || r.Connections < 1 {
			continue
		}
		if v == flow.Allow && (r.Packets == 0 || r.Bytes == 0) {
			continue
		}
		return true
	}
	return false
}

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
