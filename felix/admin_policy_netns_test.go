package felix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/internal/nstest"
	"github.com/tabbynet/tabby/felix/ipsets"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// adminLab is a node (a namespace forwarding between veths) with two pods (namespaces behind
// cali veths), and felix's policy manager writing the node's real iptables and ipsets.
type adminLab struct {
	t      *testing.T
	node   *nstest.NS
	pods   map[string]*labPod
	m      *policyManager
	tables map[ipfamily.Family]*iptables.Table
	sets   *ipsets.IPSets
}

type labPod struct {
	key   policy.Key
	ns    *nstest.NS
	iface string
	ips   ipfamily.Pair[netip.Addr]
}

func newAdminLab(t *testing.T) *adminLab {
	node := nstest.New(t)
	l := &adminLab{t: t, node: node, pods: map[string]*labPod{}, tables: map[ipfamily.Family]*iptables.Table{}}
	node.Exec(t, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	backend := iptables.DetectBackend(context.Background(), node.Runner)
	filter := map[ipfamily.Family]ChainWriter{}
	for _, fam := range ipfamily.All {
		tb, err := iptables.New(iptables.Options{Family: fam, Table: "filter", Backend: backend, Runner: node.Runner})
		if err != nil {
			t.Fatal(err)
		}
		l.tables[fam], filter[fam] = tb, tb
	}
	sets, err := ipsets.New(ipsets.Options{Runner: node.Runner})
	if err != nil {
		t.Fatal(err)
	}
	l.sets = sets
	l.m = newPolicyManager(filter, sets)
	ips := map[policy.Key][]netip.Addr{}
	for i, name := range []string{"cli/client", "srv/server"} {
		l.addPod(name, i+1)
		p := l.pods[name]
		ips[p.key] = []netip.Addr{p.ips.Get(ipfamily.IPv4), p.ips.Get(ipfamily.IPv6)}
	}
	for _, ns := range []string{"cli", "srv"} {
		l.m.OnUpdate(NamespaceUpdate{Namespace: policy.Namespace{Name: ns}})
	}
	l.m.OnUpdate(PodIPsUpdate{IPs: ips})
	l.m.OnUpdate(PolicyInSync{})
	l.apply()
	return l
}

// addPod makes a pod namespace behind cali veth number i, with an address of each family and
// routes both ways.
func (l *adminLab) addPod(name string, i int) {
	p := newLabPod(l.t, l.node, name, i)
	l.pods[name] = p
	l.m.OnUpdate(PodUpdate{Pod: &policy.Pod{Key: p.key, Labels: map[string]string{"app": p.key.Name}}})
	l.m.OnUpdate(model.WorkloadUpdate{Workload: model.Workload{Pod: p.key, Interface: p.iface}})
}

// newLabPod makes pod NAMESPACE/NAME in a namespace behind cali veth number i of node, with
// 10.244.i.2 and fd00:10:244::i:2 and routes both ways.
func newLabPod(t *testing.T, node *nstest.NS, name string, i int) *labPod {
	t.Helper()
	ns, podName, _ := strings.Cut(name, "/")
	key := policy.Key{Namespace: ns, Name: podName}
	p := &labPod{key: key, ns: nstest.New(t), iface: fmt.Sprintf("cali%011d", i)}
	p.ips.Set(ipfamily.IPv4, netip.MustParseAddr(fmt.Sprintf("10.244.%d.2", i)))
	p.ips.Set(ipfamily.IPv6, netip.MustParseAddr(fmt.Sprintf("fd00:10:244::%d:2", i)))
	node.Exec(t, "ip", "link", "add", p.iface, "type", "veth", "peer", "name", "eth0", "netns", p.ns.Path())
	node.Exec(t, "ip", "addr", "add", fmt.Sprintf("10.244.%d.1/24", i), "dev", p.iface)
	node.Exec(t, "ip", "addr", "add", fmt.Sprintf("fd00:10:244::%d:1/112", i), "dev", p.iface, "nodad")
	node.Exec(t, "ip", "link", "set", p.iface, "up")
	p.ns.Exec(t, "ip", "addr", "add", p.ips.Get(ipfamily.IPv4).String()+"/24", "dev", "eth0")
	p.ns.Exec(t, "ip", "addr", "add", p.ips.Get(ipfamily.IPv6).String()+"/112", "dev", "eth0", "nodad")
	p.ns.Exec(t, "ip", "link", "set", "eth0", "up")
	p.ns.Exec(t, "ip", "route", "add", "default", "via", fmt.Sprintf("10.244.%d.1", i))
	p.ns.Exec(t, "ip", "-6", "route", "add", "default", "via", fmt.Sprintf("fd00:10:244::%d:1", i))
	return p
}

// apply runs the manager's pass and the writers as felix's loop does.
func (l *adminLab) apply() {
	l.t.Helper()
	ctx := context.Background()
	if err := l.m.CompleteDeferredWork(ctx, false); err != nil {
		l.t.Fatal(err)
	}
	if err := l.sets.ApplyUpdates(ctx); err != nil {
		l.t.Fatal(err)
	}
	for _, fam := range ipfamily.All {
		if err := l.tables[fam].Apply(ctx); err != nil {
			l.t.Fatal(err)
		}
	}
	if err := l.sets.ApplyDeletions(ctx); err != nil {
		l.t.Fatal(err)
	}
}

func (l *adminLab) send(msgs ...any) {
	for _, m := range msgs {
		l.m.OnUpdate(m)
	}
	l.apply()
}

// listen serves TCP on the server pod's address of fam, port 8080.
func (l *adminLab) listen(fam ipfamily.Family) {
	l.t.Helper()
	srv := l.pods["srv/server"]
	serve(l.t, srv.ns, netip.AddrPortFrom(srv.ips.Get(fam), 8080))
}

// dial connects from the client pod to the server pod in fam, within timeout.
func (l *adminLab) dial(fam ipfamily.Family, timeout time.Duration) (net.Conn, error) {
	return dialIn(l.pods["cli/client"].ns, netip.AddrPortFrom(l.pods["srv/server"].ips.Get(fam), 8080), timeout)
}

func dialIn(n *nstest.NS, addr netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := n.Enter(func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr.String(), timeout)
		return err
	})
	return c, err
}

// echo writes a line on c and reads it back within timeout.
func echo(c net.Conn, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	buf := make([]byte, 5)
	_, err := io.ReadFull(c, buf)
	return err
}

// expect checks a new connection from the client pod to the server pod in both families.
func (l *adminLab) expect(step string, allowed bool) {
	l.t.Helper()
	for _, fam := range ipfamily.All {
		connect(l.t, step+" "+fam.String(), l.pods["cli/client"].ns, netip.AddrPortFrom(l.pods["srv/server"].ips.Get(fam), 8080), allowed)
	}
}

func serverSubject() anpv1alpha1.AdminNetworkPolicySubject {
	return anpv1alpha1.AdminNetworkPolicySubject{Pods: &anpv1alpha1.NamespacedPod{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "srv"}},
		PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}}
}

func fromClients() []anpv1alpha1.AdminNetworkPolicyIngressPeer {
	return []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "cli"}}}}
}

func anpUpdate(name string, prio int32, action anpv1alpha1.AdminNetworkPolicyRuleAction) AdminPolicyUpdate {
	return AdminPolicyUpdate{Policy: policy.FromANP(&anpv1alpha1.AdminNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: anpv1alpha1.AdminNetworkPolicySpec{Priority: prio, Subject: serverSubject(),
			Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{{Name: string(action), Action: action, From: fromClients()}}},
	})}
}

// The tiers enforced by the real kernel, in both families: an AdminNetworkPolicy Deny beats a
// NetworkPolicy Allow, Pass hands the decision to NetworkPolicy, the BaselineAdminNetworkPolicy
// decides only where no NetworkPolicy selects the pod, and an admin egress Deny never drops the
// replies of a connection the other end opened.
func TestAdminTiersInNetns(t *testing.T) {
	nstest.Require(t)
	l := newAdminLab(t)
	for _, fam := range ipfamily.All {
		l.listen(fam)
	}
	l.expect("no policy", true)

	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "srv", Name: "allow-cli", ResourceVersion: "1"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": "cli"}}}}}}}}
	l.send(NetworkPolicyUpdate{Policy: allow})
	l.expect("NetworkPolicy allows", true)

	// A connection open before the Deny keeps flowing; new ones are dropped.
	open := map[ipfamily.Family]net.Conn{}
	for _, fam := range ipfamily.All {
		c, err := l.dial(fam, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open[fam] = c
	}
	l.send(anpUpdate("deny-cli", 10, anpv1alpha1.AdminNetworkPolicyRuleActionDeny))
	l.expect("ANP Deny over NetworkPolicy Allow", false)
	for fam, c := range open {
		if err := echo(c, 5*time.Second); err != nil {
			t.Fatalf("%v: a connection established before the Deny was cut: %v", fam, err)
		}
	}

	// A Pass at a lower priority number comes first: NetworkPolicy decides.
	l.send(anpUpdate("pass-cli", 5, anpv1alpha1.AdminNetworkPolicyRuleActionPass))
	l.expect("Pass to NetworkPolicy Allow", true)
	isolate := allow.DeepCopy()
	isolate.ResourceVersion = "2"
	isolate.Spec.Ingress = nil
	l.send(NetworkPolicyUpdate{Policy: isolate})
	l.expect("Pass to NetworkPolicy isolation", false)

	// The baseline: only where no NetworkPolicy selects the pod.
	l.send(NetworkPolicyRemove{Key: policy.Key{Namespace: "srv", Name: "allow-cli"}},
		AdminPolicyRemove{Key: policy.AdminKey{Kind: policy.KindANP, Name: "deny-cli"}},
		AdminPolicyUpdate{Policy: policy.FromBANP(&anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{Subject: serverSubject(),
				Ingress: []anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: "Deny", From: fromClients()}}}})})
	l.expect("Pass, no NetworkPolicy, BANP Deny", false)
	allow.ResourceVersion = "3"
	l.send(NetworkPolicyUpdate{Policy: allow})
	l.expect("Pass, NetworkPolicy Allow over BANP Deny", true)

	// Replies: the server's egress to the clients denied by an admin policy; the clients'
	// connections to it still work (their replies are established traffic).
	l.send(AdminPolicyUpdate{Policy: policy.FromANP(&anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-egress"},
		Spec: anpv1alpha1.AdminNetworkPolicySpec{Priority: 1, Subject: serverSubject(),
			Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{{Action: "Deny", To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{
				Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "cli"}}}}}}}})})
	l.expect("server egress denied, replies of client connections", true)

	// A ClusterNetworkPolicy of the Admin tier, the API's successor, in the same tier.
	cnp := &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cnp-deny"}, Spec: cnpv1beta1.ClusterNetworkPolicySpec{
		Tier: cnpv1beta1.AdminTier, Priority: 0,
		Subject: cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: serverSubject().Pods.NamespaceSelector, PodSelector: serverSubject().Pods.PodSelector}},
		Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{{Action: "Deny", From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: fromClients()[0].Namespaces}},
			Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1beta1.Port{Number: 8080}}}}}}}}
	l.send(AdminPolicyUpdate{Policy: policy.FromCNP(cnp)})
	l.expect("ClusterNetworkPolicy Admin Deny over NetworkPolicy Allow", false)
	l.send(AdminPolicyRemove{Key: policy.AdminKey{Kind: policy.KindCNP, Name: "cnp-deny"}})
	l.expect("ClusterNetworkPolicy removed", true)
}

// A pod's traffic to its own node (INPUT, not forwarded) is policed by the admin tiers: a nodes
// peer Deny stops it; NetworkPolicy, even isolating the pod's egress, always allows it; and the
// node's own connections to the pod (kubelet probes) keep their replies.
func TestAdminNodePeerInNetns(t *testing.T) {
	nstest.Require(t)
	l := newAdminLab(t)
	client := l.pods["cli/client"]
	gw := ipfamily.Pair[netip.Addr]{}
	gw.Set(ipfamily.IPv4, netip.MustParseAddr("10.244.1.1"))
	gw.Set(ipfamily.IPv6, netip.MustParseAddr("fd00:10:244::1:1"))
	l.send(model.NodeUpdate{Node: model.Node{Name: "n1", Labels: map[string]string{"role": "worker"}, InternalIP: gw}})
	for _, fam := range ipfamily.All {
		l.listen(fam)
		serve(t, l.node, netip.AddrPortFrom(gw.Get(fam), 8081))
		serve(t, client.ns, netip.AddrPortFrom(client.ips.Get(fam), 9090))
	}
	toNode := func(step string, allowed bool) {
		t.Helper()
		for _, fam := range ipfamily.All {
			connect(t, step+" pod -> node "+fam.String(), client.ns, netip.AddrPortFrom(gw.Get(fam), 8081), allowed)
			connect(t, step+" node -> pod "+fam.String(), l.node, netip.AddrPortFrom(client.ips.Get(fam), 9090), true)
		}
	}
	toNode("no policy", true)

	nodes := &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}}
	subject := anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "cli"}}}
	l.send(AdminPolicyUpdate{Policy: policy.FromANP(&anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-node"},
		Spec: anpv1alpha1.AdminNetworkPolicySpec{Priority: 1, Subject: subject,
			Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{{Action: "Deny", To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{Nodes: nodes}}}}}})})
	toNode("ANP Deny to nodes", false)
	l.expect("ANP Deny to nodes, pod to pod", true)

	// Pass, with NetworkPolicy isolating the pod's egress: NetworkPolicy allows its node.
	l.send(AdminPolicyUpdate{Policy: policy.FromANP(&anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-node"},
		Spec: anpv1alpha1.AdminNetworkPolicySpec{Priority: 1, Subject: subject,
			Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{{Action: "Pass", To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{Nodes: nodes}}}}}})},
		NetworkPolicyUpdate{Policy: &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "isolate", ResourceVersion: "1"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}})
	toNode("Pass, NetworkPolicy egress isolation", true)

	// Without the NetworkPolicy, the baseline decides.
	l.send(NetworkPolicyRemove{Key: policy.Key{Namespace: "cli", Name: "isolate"}},
		AdminPolicyUpdate{Policy: policy.FromBANP(&anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{Subject: subject,
				Egress: []anpv1alpha1.BaselineAdminNetworkPolicyEgressRule{{Action: "Deny", To: []anpv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Nodes: nodes}}}}}})})
	toNode("Pass, BANP Deny to nodes", false)
}

// serve answers TCP on addr inside n: each connection gets its bytes back.
func serve(t *testing.T, n *nstest.NS, addr netip.AddrPort) {
	t.Helper()
	var ln net.Listener
	if err := n.Enter(func() error {
		var err error
		ln, err = net.Listen("tcp", addr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
}

// connect checks a new connection from inside n to addr: allowed connects and echoes (retried
// until a deadline), denied times out.
func connect(t *testing.T, step string, n *nstest.NS, addr netip.AddrPort, allowed bool) {
	t.Helper()
	dial := func(timeout time.Duration) (net.Conn, error) { return dialIn(n, addr, timeout) }
	if !allowed {
		c, err := dial(2 * time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("%s: want denied, the connection was made", step)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%s: want a dropped SYN (timeout), got %v", step, err)
		}
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		var c net.Conn
		if c, err = dial(2 * time.Second); err == nil {
			err = echo(c, 5*time.Second)
			c.Close()
			if err == nil {
				return
			}
		}
	}
	t.Fatalf("%s: want allowed, got %v", step, err)
}
