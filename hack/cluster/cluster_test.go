package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/promtext"
)

// startCluster brings a cluster up for one test and removes it when the test ends, printing
// its diagnostics first if the test failed.
func startCluster(t *testing.T, o Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("real cluster: needs root and the node components (skipped under -short)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the cluster needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := Up(ctx, o)
	if err != nil {
		t.Fatalf("cluster up: %v", err)
	}
	t.Logf("cluster %s up in %s: %d nodes, tabby from the chart", c.Lab.ID, time.Since(start).Round(time.Millisecond), len(c.Nodes))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			t.Logf("diagnostics:\n%s", c.Diagnostics(ctx))
		}
		if err := c.Close(ctx); err != nil {
			t.Errorf("cluster teardown: %v", err)
		}
		for _, n := range c.Nodes {
			for _, h := range cgroupHierarchies(true) {
				if _, err := os.Stat(h + n.CgroupRoot); err == nil {
					t.Errorf("cgroup %s%s survived the teardown", h, n.CgroupRoot)
				}
			}
		}
	})
	return c
}

// A pod on each node, created with the API as a user would, gets an address from tabby's pool;
// the two reach each other across nodes and through a Service's ClusterIP (kube-proxy's DNAT
// beside tabby's NAT outgoing), by address and by name through the cluster's DNS; deleting them
// releases their addresses. And every tabby-node found its container's memory limit, and watches the
// cluster-wide kinds through the chart's tabby-typha replicas.
func TestPodsAcrossNodes(t *testing.T) {
	podsAcrossNodes(t, startCluster(t, Options{}), nil)
}

// The same with the pool in VXLAN and no BGP on any node (the chart's bgp.enabled=false): the
// pods' traffic crosses nodes through vxlan.tabby, on routes tabby-node programmed from the
// datastore alone.
func TestPodsAcrossNodesVXLAN(t *testing.T) {
	c := startCluster(t, Options{Encap: "vxlan"})
	podsAcrossNodes(t, c, func(ctx context.Context, ips map[string]string) {
		for i, n := range c.Nodes {
			out, err := n.Exec(ctx, "ip", "-d", "link", "show", "vxlan.tabby")
			if err != nil || !strings.Contains(out, "vxlan id ") {
				t.Errorf("node %s: no VXLAN device vxlan.tabby: %v: %s", n.Name, err, out)
			}
			other := c.Nodes[(i+1)%len(c.Nodes)]
			if out, err := n.Exec(ctx, "ip", "route", "get", ips[other.Name]); err != nil || !strings.Contains(out, "dev vxlan.tabby") {
				t.Errorf("node %s: the pod on %s (%s) is not reached through vxlan.tabby: %v: %s", n.Name, other.Name, ips[other.Name], err, out)
			}
			if out, _ := n.Exec(ctx, "ss", "-Htln", "sport", "=", ":179"); strings.TrimSpace(out) != "" {
				t.Errorf("node %s listens for BGP with BGP off: %s", n.Name, out)
			}
			// The API server's proxy reaches the pod (what kubectl port-forward's and the e2e
			// tests' proxy checks need) with a reply larger than a handshake.
			if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
				out, err := c.Lab.Kube.CoreV1().Pods("smoke").ProxyGet("http", "netexec-"+n.Name, "8080", "/hostname", nil).DoRaw(ctx)
				if err != nil || strings.TrimSpace(string(out)) != "netexec-"+n.Name {
					return fmt.Errorf("%q, %v", out, err)
				}
				return nil
			}); err != nil {
				t.Errorf("the API server's proxy to the pod on %s: %v", n.Name, err)
			}
		}
	})
}

// podsAcrossNodes runs the test on c; also, when not nil, runs while the pods are up with their
// addresses by node.
func podsAcrossNodes(t *testing.T, c *Cluster, also func(context.Context, map[string]string)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kube := c.Lab.Kube
	ns := "smoke"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		p := netexecPod(n.Name)
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "netexec"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	svc, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	if err := lab.Eventually(ctx, 2*time.Minute, func(context.Context) error {
		for _, n := range c.Nodes {
			p, err := kube.CoreV1().Pods(ns).Get(ctx, "netexec-"+n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !podReady(p) {
				return fmt.Errorf("pod %s not ready (%s)", p.Name, p.Status.Phase)
			}
			ips[n.Name] = p.Status.PodIP
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for node, ip := range ips {
		a, err := netip.ParseAddr(ip)
		if err != nil || !lab.PodCIDR.Contains(a) {
			t.Fatalf("pod on %s has address %q, not one of tabby's pool %s", node, ip, lab.PodCIDR)
		}
	}
	t.Logf("pod addresses: %v", ips)

	from := "netexec-" + c.Nodes[0].Name
	targets := map[string]string{
		"pod on " + c.Nodes[1].Name: ips[c.Nodes[1].Name] + ":8080",
		"Service ClusterIP":         svc.Spec.ClusterIP + ":80",
		// CoreDNS, itself a pod, answers through the kube-dns Service.
		"Service by name": svc.Name + "." + ns + ".svc." + ClusterDomain + ":80",
		// The resolv.conf kubelet wrote: the namespace's search domain, as the e2e tests' nc.
		"Service by short name": svc.Name + ":80",
	}
	for what, dst := range targets {
		if err := lab.Eventually(ctx, 30*time.Second, func(context.Context) error {
			_, err := c.Kubectl(ctx, "exec", "-n", ns, from, "--", "/agnhost", "connect", dst, "--timeout=3s")
			return err
		}); err != nil {
			t.Errorf("%s → %s (%s): %v", from, what, dst, err)
		} else {
			t.Logf("%s → %s (%s): connected", from, what, dst)
		}
	}
	// A name outside the cluster does not exist: answered at once, not a failure to retry
	// (SERVFAIL). Absolute, so that the search domains, which the cluster answers, are not tried.
	if err := lab.Eventually(ctx, 30*time.Second, func(context.Context) error {
		out, _ := c.Kubectl(ctx, "exec", "-n", ns, from, "--", "nslookup", "tabby.example.com.")
		if !strings.Contains(out, "NXDOMAIN") {
			return fmt.Errorf("nslookup tabby.example.com.: want NXDOMAIN: %s", out)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}

	if also != nil {
		also(ctx, ips)
	}
	for _, n := range c.Nodes {
		if err := kube.CoreV1().Pods(ns).Delete(ctx, "netexec-"+n.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lab.Eventually(ctx, time.Minute, func(context.Context) error {
		for _, ip := range ips {
			// Exit status 1 with "not allocated" is the answer wanted.
			out, err := c.Lab.Tabbyctl(ctx, "ipam", "show", "--ip", ip)
			if !strings.Contains(out, "not allocated") {
				return fmt.Errorf("%s still allocated after its pod's deletion: %v: %s", ip, err, out)
			}
		}
		if out, err := c.Lab.Tabbyctl(ctx, "ipam", "check"); err != nil || !strings.Contains(out, "No problems found") {
			return fmt.Errorf("ipam check: %v\n%s", err, out)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	checkMemoryLimit(ctx, t, c)
	checkAgentsOnTypha(ctx, t, c)
}

// checkAgentsOnTypha: the chart's tabby-typha replicas serve, between them, every tabby-node's
// watch of every cluster-wide kind (their /metrics, through the API server's proxy). An agent
// that started before any replica was ready watches the API server until its next probe finds
// one (RetryAfter and up to half again) and then moves each watch within a sixth of RetryAfter:
// the deadline leaves room for that whole cycle.
func checkAgentsOnTypha(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	back := client.DefaultRetryAfter*3/2 + client.DefaultRetryAfter/6
	err := lab.Eventually(ctx, back+30*time.Second, func(context.Context) error {
		pods, err := c.Lab.Kube.CoreV1().Pods(lab.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=tabby-typha"})
		if err != nil {
			return err
		}
		watches := map[string]float64{}
		for _, p := range pods.Items {
			raw, err := c.Lab.Kube.CoreV1().Pods(lab.Namespace).ProxyGet("http", p.Name, "9093", "/metrics", nil).DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("metrics of %s: %w", p.Name, err)
			}
			const name = "tabby_typha_watches"
			for res, n := range promtext.ByLabel(promtext.Parse(string(raw), name)[name], "resource") {
				watches[res] += n
			}
		}
		for res := range client.FannedOut {
			if watches[res] != float64(len(c.Nodes)) {
				return fmt.Errorf("%d tabby-typha pods serve %v watches of %s, want one per node (%d): %v", len(pods.Items), watches[res], res, len(c.Nodes), watches)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// checkMemoryLimit: every tabby-node, run by the chart under its memory limit (256Mi), gives Go's
// runtime 90% of it as a soft limit, read from the container's cgroup.
func checkMemoryLimit(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	const want = `msg="Go memory limit from the cgroup" bytes=241591910 ` // 0.9 × 256 MiB
	pods, err := c.Lab.Kube.CoreV1().Pods(lab.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=tabby-node"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(c.Nodes) {
		t.Fatalf("%d tabby-node pods for %d nodes", len(pods.Items), len(c.Nodes))
	}
	for _, p := range pods.Items {
		out, err := c.Lab.Kube.CoreV1().Pods(lab.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "tabby-node"}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs of %s: %v", p.Name, err)
		}
		if !strings.Contains(string(out), want) {
			first, _, _ := strings.Cut(string(out), "\n")
			t.Errorf("%s did not log %q; its log starts: %s", p.Name, want, first)
		}
	}
}

func netexecPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec-" + node, Labels: map[string]string{"app": "netexec"}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "netexec", Image: AgnhostImage, ImagePullPolicy: corev1.PullNever,
				Args:           []string{"netexec", "--http-port=8080", "--udp-port=8081"},
				Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			}},
		},
	}
}
