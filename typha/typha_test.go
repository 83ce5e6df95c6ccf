package typha_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/promtext"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/typha"
)

// replica is one running tabby-typha.
type replica struct {
	api, metrics string
	stop         func()
}

func startTypha(t *testing.T, env *testenv.Env, cert, key string, connAge time.Duration) *replica {
	t.Helper()
	ty, err := typha.New(env.Config, typha.Config{Listen: "127.0.0.1:0", HealthAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", CertFile: cert, KeyFile: key, MaxConnAge: connAge},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ty.Run(ctx) }()
	api, health, metrics := ty.Addrs()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("tabby-typha: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	testwait.Until(t, "tabby-typha ready", 30*time.Second, func() bool {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return &replica{api: api, metrics: metrics, stop: stop}
}

// metric reads one sample of tabby-typha's /metrics (0 when absent).
func (r *replica) metric(t *testing.T, name, resource string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return promtext.ByLabel(promtext.Parse(string(body), name)[name], "resource")[resource]
}

// agentToken is the token of a service account that may list and watch what tabby-node reads
// cluster-wide (allowed) or nothing.
func agentToken(t *testing.T, ctx context.Context, env *testenv.Env, name string, allowed bool) string {
	t.Helper()
	const ns = "kube-system"
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if allowed {
		read := []string{"list", "watch"}
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "pods", "namespaces", "services"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{v1.GroupName}, Resources: []string{"ippools", "ipamblocks", "bgpconfigurations", "bgppeers", "bgpfilters", "felixconfigurations"}, Verbs: read},
		}}
		if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}
		if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func setup(t *testing.T) (*testenv.Env, context.Context, string, string, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ca, cert, key, err := testenv.ServingCert(t.TempDir(), "tabby-typha")
	if err != nil {
		t.Fatal(err)
	}
	return env, ctx, ca, cert, key
}

// endpoints is the agent's list of replicas, which the test moves.
type endpoints struct {
	mu    sync.Mutex
	addrs []string
}

func (e *endpoints) set(addrs ...string) { e.mu.Lock(); e.addrs = addrs; e.mu.Unlock() }
func (e *endpoints) get(context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addrs, nil
}

func agentClient(t *testing.T, env *testenv.Env, token, ca string, eps *endpoints) (*client.Client, *client.Fanout) {
	t.Helper()
	cfg := &rest.Config{Host: env.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	direct, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := direct.WithFanout(cfg, client.FanoutConfig{Endpoints: eps.get, CAFile: ca, ServerName: "tabby-typha", RetryAfter: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c, c.Fanout()
}

func run(t *testing.T, ctx context.Context, inf cache.SharedIndexInformer) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testwait.Until(t, "informer synced", 30*time.Second, inf.HasSynced)
}

func newBlock(name, cidr string) *v1.IPAMBlock {
	return &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.IPAMBlockSpec{CIDR: cidr}}
}

func has(inf cache.SharedIndexInformer, key string) func() bool {
	return func() bool { _, ok, _ := inf.GetStore().GetByKey(key); return ok }
}

// An agent's informers list and watch through tabby-typha: a pod arrives cut down to what
// tabby-node reads (the proof it came through tabby-typha, which trims), blocks come and go, and
// tabby-typha counts one watch of each.
func TestInformersThroughTypha(t *testing.T) {
	env, ctx, ca, cert, key := setup(t)
	r := startTypha(t, env, cert, key, 0)
	c, fan := agentClient(t, env, agentToken(t, ctx, env, "tabby-node", true), ca, &endpoints{addrs: []string{r.api}})

	if _, err := env.Client.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
			{Name: "c", Image: "registry.example/web:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "sidecar", Image: "registry.example/side:1"}}}}
	if _, err := env.Client.Pods("apps").Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pods := client.Informer(c.Pods(""), nil)
	blocks := client.Informer(c.IPAMBlocks(), nil)
	run(t, ctx, pods)
	run(t, ctx, blocks)

	obj, ok, _ := pods.GetStore().GetByKey("apps/web")
	if !ok {
		t.Fatal("the pod is not in the agent's cache")
	}
	got := obj.(*corev1.Pod)
	if len(got.Spec.Containers) != 1 || got.Spec.Containers[0].Image != "" || got.Spec.Containers[0].Ports[0].Name != "http" ||
		got.Labels["app"] != "web" || got.Spec.NodeName != "n1" {
		t.Errorf("pod as the agent got it: %+v; want labels, node and the named port, no image", got.Spec)
	}
	b, err := env.Client.IPAMBlocks().Create(ctx, newBlock("10-244-0-0-26", "10.244.0.0/26"))
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the new block in the agent's cache", 10*time.Second, has(blocks, b.Name))
	if err := env.Client.Pods("apps").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the deleted pod gone from the agent's cache", 10*time.Second, func() bool { return !has(pods, "apps/web")() })

	// A Service and an EndpointSlice (the discovery group's path) arrive trimmed: no ports, no
	// endpoint addresses; the endpoint's node and readiness are there.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := env.Kube.CoreV1().Services("apps").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, ready := "n1", true
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}}
	if _, err := env.Kube.DiscoveryV1().EndpointSlices("apps").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	services := client.Informer(c.Services(""), nil)
	slices := client.Informer(c.EndpointSlices(""), nil)
	run(t, ctx, services)
	run(t, ctx, slices)
	testwait.Until(t, "the Service and its EndpointSlice in the agent's caches", 10*time.Second, func() bool {
		return has(services, "apps/web")() && has(slices, "apps/web-1")()
	})
	obj, _, _ = services.GetStore().GetByKey("apps/web")
	if got := obj.(*corev1.Service); got.Spec.Type != corev1.ServiceTypeLoadBalancer || got.Spec.ClusterIP == "" || len(got.Spec.Ports) != 0 {
		t.Errorf("Service as the agent got it: %+v; want its type and cluster IP, no ports", got.Spec)
	}
	obj, _, _ = slices.GetStore().GetByKey("apps/web-1")
	if got := obj.(*discoveryv1.EndpointSlice); len(got.Endpoints) != 1 || len(got.Endpoints[0].Addresses) != 0 || *got.Endpoints[0].NodeName != "n1" ||
		!*got.Endpoints[0].Conditions.Ready || got.Labels[discoveryv1.LabelServiceName] != "web" {
		t.Errorf("EndpointSlice as the agent got it: %+v; want its Service, the endpoint's node and readiness, no address", got)
	}
	for _, res := range []string{"pods", "ipamblocks", "services", "endpointslices"} {
		if n := r.metric(t, "tabby_typha_watches", res); n != 1 {
			t.Errorf("tabby-typha serves %v watches of %s, want 1", n, res)
		}
	}
	if !fan.ViaTypha() {
		t.Error("the agent does not count itself as on tabby-typha")
	}
}

// tabby-typha serves only what the API server would: no token, a token the API server does not
// know, or an identity that may not list a kind gets the API server's 401 or 403; a selector is
// refused (it serves whole collections), an unknown path is 404. Every answer is HTTP/1.1.
func TestTyphaRefuses(t *testing.T) {
	env, ctx, ca, cert, key := setup(t)
	r := startTypha(t, env, cert, key, 0)
	agent := agentToken(t, ctx, env, "tabby-node", true)
	stranger := agentToken(t, ctx, env, "stranger", false)
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	// Offered HTTP/2, as client-go does, it answers HTTP/1.1 (typha.go says why).
	hc := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "tabby-typha"}}}
	for _, tc := range []struct {
		name, path, token string
		code              int
		says              string
	}{
		{"agent", "/apis/tabby.dev/v1/ipamblocks", agent, 200, `"kind":"IPAMBlockList"`},
		{"no token", "/apis/tabby.dev/v1/ipamblocks", "", 401, "bearer token"},
		{"unknown token", "/api/v1/pods", "not-a-token", 401, "not accepted"},
		{"no right", "/api/v1/pods", stranger, 403, "system:serviceaccount:kube-system:stranger"},
		{"selector", "/api/v1/pods?labelSelector=app%3Dweb", agent, 400, "labelSelector"},
		{"not served", "/api/v1/secrets", agent, 404, "not found"},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.api+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, resp.StatusCode, body, tc.code, tc.says)
		}
		if resp.ProtoMajor != 1 {
			t.Errorf("%s: answered over %s, want HTTP/1.1", tc.name, resp.Proto)
		}
	}
}

// When its replica goes, an agent's watch resumes on another at the resourceVersion it had, with
// no list; with no replica left it watches the API server directly, again without a list, and
// no event is lost on the way.
func TestAgentMovesBetweenReplicasWithoutListing(t *testing.T) {
	env, ctx, ca, cert, key := setup(t)
	a, b := startTypha(t, env, cert, key, 0), startTypha(t, env, cert, key, 0)
	eps := &endpoints{addrs: []string{a.api}}
	c, fan := agentClient(t, env, agentToken(t, ctx, env, "tabby-node", true), ca, eps)
	blocks := client.Informer(c.IPAMBlocks(), nil)
	run(t, ctx, blocks)
	create := func(i int) string {
		t.Helper()
		b, err := env.Client.IPAMBlocks().Create(ctx, newBlock(fmt.Sprintf("b%d", i), fmt.Sprintf("10.244.%d.0/26", i)))
		if err != nil {
			t.Fatal(err)
		}
		return b.Name
	}
	// An event after both replicas listed: the agent's resourceVersion is one both logs reach.
	testwait.Until(t, "b1 through replica a", 10*time.Second, has(blocks, create(1)))

	eps.set(b.api)
	a.stop()
	testwait.Until(t, "b2 through replica b", 20*time.Second, has(blocks, create(2)))
	if n := b.metric(t, "tabby_typha_watches", "ipamblocks"); n != 1 {
		t.Errorf("replica b serves %v watches of ipamblocks, want 1", n)
	}
	if n := b.metric(t, "tabby_typha_lists_total", "ipamblocks"); n != 0 {
		t.Errorf("the agent listed %v times on replica b, want 0: it should resume its watch", n)
	}

	eps.set()
	b.stop()
	testwait.Until(t, "b3 from the API server directly", 20*time.Second, has(blocks, create(3)))
	if fan.ViaTypha() {
		t.Error("with no replica the agent still counts itself as on tabby-typha")
	}
	for _, k := range []string{"b1", "b2", "b3"} {
		if !has(blocks, k)() {
			t.Errorf("%s lost on the way", k)
		}
	}
}

// Connections have an age: agents that all landed on one replica (the other was restarting)
// spread over both within a few ages, and their informers go on without a gap.
func TestAgentsSpreadOverReplicas(t *testing.T) {
	env, ctx, ca, cert, key := setup(t)
	// Short, for the test: each age ends the agent's watches, and client-go backs off longer at
	// each end within two minutes (0.8 s doubling, up to 30 s), which the default ages (15 to 30
	// minutes) never reach.
	const age = time.Second
	a, b := startTypha(t, env, cert, key, age), startTypha(t, env, cert, key, age)
	eps := &endpoints{addrs: []string{a.api}}
	c, _ := agentClient(t, env, agentToken(t, ctx, env, "tabby-node", true), ca, eps)
	blocks, pods := client.Informer(c.IPAMBlocks(), nil), client.Informer(c.Pods(""), nil)
	run(t, ctx, blocks)
	run(t, ctx, pods)
	eps.set(a.api, b.api)
	testwait.Until(t, "a watch on replica b", 20*time.Second, func() bool {
		return b.metric(t, "tabby_typha_watches", "ipamblocks")+b.metric(t, "tabby_typha_watches", "pods") > 0
	})
	if _, err := env.Client.IPAMBlocks().Create(ctx, newBlock("after-spread", "10.244.9.0/26")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a block created after the move", 45*time.Second, has(blocks, "after-spread"))
}

// A restart of the API server (an upgrade of the control plane) can make tabby-typha list a kind
// again: the new API server's watch cache no longer reaches its watch's resourceVersion. The
// agents' watches then go on with the difference (a block created, one deleted, while it was
// down or since), and no agent lists again, which would be every node of the cluster at once.
func TestRelistKeepsAgentsWatching(t *testing.T) {
	env, ctx, ca, cert, key := setup(t)
	r := startTypha(t, env, cert, key, 0)
	c, _ := agentClient(t, env, agentToken(t, ctx, env, "tabby-node", true), ca, &endpoints{addrs: []string{r.api}})
	blocks := client.Informer(c.IPAMBlocks(), nil)
	run(t, ctx, blocks)
	before, err := env.Client.IPAMBlocks().Create(ctx, newBlock("before", "10.244.1.0/26"))
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the first block through tabby-typha", 10*time.Second, has(blocks, before.Name))
	lists := r.metric(t, "tabby_typha_lists_total", "ipamblocks")

	if err := env.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.IPAMBlocks().Delete(ctx, before.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	after, err := env.Client.IPAMBlocks().Create(ctx, newBlock("after", "10.244.2.0/26"))
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the agent's cache after the restart: the new block, not the deleted one", 30*time.Second, func() bool {
		return has(blocks, after.Name)() && !has(blocks, before.Name)()
	})
	testwait.Until(t, "tabby-typha's relist of ipamblocks", 30*time.Second, func() bool {
		return r.metric(t, "tabby_typha_relists_total", "ipamblocks") > 0
	})
	if n := r.metric(t, "tabby_typha_lists_total", "ipamblocks") - lists; n != 0 {
		t.Errorf("the agent listed %v more times: its watch should have gone on", n)
	}
	if n := r.metric(t, "tabby_typha_watches_expired_total", "ipamblocks"); n != 0 {
		t.Errorf("%v watches ended with 410", n)
	}
}
