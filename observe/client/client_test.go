package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/observe"
	"github.com/tabbynet/tabby/observe/server"
)

type fakeAuth struct{}

func (fakeAuth) AuthorizeVerbs(_ context.Context, token string, res schema.GroupVersionResource, _ ...string) error {
	if token != "viewer" {
		return apierrors.NewUnauthorized("token not accepted by the API server")
	}
	return nil
}

// node is a node's fake flow log and BGP status: kept records, then what arrives on live.
type node struct {
	name string
	kept []flow.Record
	live chan flow.Record
}

func (n *node) Flows(ctx context.Context, f flow.Filter, follow bool, send func(flow.Record) error) error {
	return flow.Stream(ctx, f, n.kept, follow, n.live, send)
}

func (n *node) Status(context.Context) (*status.PeersReply, error) {
	return &status.PeersReply{Node: n.name, ASN: 64512}, nil
}

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func rec(node, src string, v flow.Verdict, end time.Time) flow.Record {
	return flow.Record{Node: node, Src: flow.Endpoint{Namespace: "demo", Pod: src, IP: netip.MustParseAddr("10.244.0.1")},
		Dst: flow.Endpoint{Namespace: "demo", Pod: "server", IP: netip.MustParseAddr("10.244.1.1")}, Protocol: "TCP", DstPort: 80,
		Verdict: v, Start: end.Add(-time.Second), End: end}
}

// cluster is node-1 and node-2 serving over TLS, node-3 recording an endpoint where nothing
// listens, and node-4 recording none.
type cluster struct {
	nodes map[string]*node
	srvs  map[string]*httptest.Server
	c     *Client
	mu    sync.Mutex
	errs  map[string][]error
}

func newCluster(t *testing.T, token string) *cluster {
	t.Helper()
	ca, cert, key, err := testenv.ServingCert(t.TempDir(), observe.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{nodes: map[string]*node{}, srvs: map[string]*httptest.Server{}, errs: map[string][]error{}}
	var targets []target
	for i, name := range []string{"node-1", "node-2"} {
		n := &node{name: name, live: make(chan flow.Record), kept: []flow.Record{
			rec(name, "a", flow.Deny, t0.Add(time.Duration(i)*time.Second)),
			rec(name, "b", flow.Allow, t0.Add(time.Duration(i+2)*time.Second)),
		}}
		srv := httptest.NewUnstartedServer(server.New(server.Config{Node: name, Flows: n, BGP: n, Auth: fakeAuth{}, Heartbeat: 50 * time.Millisecond}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		cl.nodes[name], cl.srvs[name] = n, srv
		targets = append(targets, target{node: name, addr: srv.Listener.Addr().String()})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	targets = append(targets, target{node: "node-3", addr: down}, target{node: "node-4"})

	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl.c = newClient(Options{Timeout: 2 * time.Second, OnNodeError: func(node string, err error) {
		cl.mu.Lock()
		cl.errs[node] = append(cl.errs[node], err)
		cl.mu.Unlock()
	}}, pool)
	if cl.c.http.Transport, err = rest.HTTPWrappersForConfig(&rest.Config{BearerToken: token}, cl.c.http.Transport); err != nil {
		t.Fatal(err)
	}
	cl.c.nodes = func(context.Context) ([]target, error) { return targets, nil }
	return cl
}

func (cl *cluster) nodeErrors(node string) []error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return append([]error(nil), cl.errs[node]...)
}

func srcs(rs []flow.Record) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Node+":"+r.Src.Pod)
	}
	return strings.Join(out, " ")
}

// Without follow: the nodes that answer, merged in time order; the others reported by name.
func TestFlowsMergeOneNodeDown(t *testing.T) {
	cl := newCluster(t, "viewer")
	var got []flow.Record
	err := cl.c.Flows(context.Background(), flow.Filter{}, false, func(r flow.Record) error { got = append(got, r); return nil })
	if err != nil {
		t.Fatalf("with OnNodeError set and nodes answering, Flows returns no error: %v", err)
	}
	if want := "node-1:a node-2:a node-1:b node-2:b"; srcs(got) != want {
		t.Errorf("merged: %s, want %s", srcs(got), want)
	}
	if e := cl.nodeErrors("node-3"); len(e) != 1 || !strings.Contains(e[0].Error(), "connect") {
		t.Errorf("node-3 (down): %v", e)
	}
	if e := cl.nodeErrors("node-4"); len(e) != 1 || !errors.Is(e[0], errNoEndpoint) {
		t.Errorf("node-4 (no endpoint): %v", e)
	}
	got = nil
	if err := cl.c.Flows(context.Background(), flow.Filter{Verdict: flow.Deny, Node: "node-2"}, false, func(r flow.Record) error { got = append(got, r); return nil }); err != nil || srcs(got) != "node-2:a" {
		t.Errorf("node-2's denies: %s, %v", srcs(got), err)
	}
	if err := cl.c.Flows(context.Background(), flow.Filter{Node: "node-9"}, false, nil); err == nil || !strings.Contains(err.Error(), `node "node-9": no such Node`) {
		t.Errorf("unknown node: %v", err)
	}
	if err := cl.c.Flows(context.Background(), flow.Filter{Verdict: "drop"}, false, nil); err == nil || !strings.Contains(err.Error(), `verdict: Unsupported value: "drop"`) {
		t.Errorf("bad verdict: %v", err)
	}
}

// Without OnNodeError the failures come back from Flows, each naming its node; a refused token
// is the node's own words.
func TestFlowsErrorsReturned(t *testing.T) {
	cl := newCluster(t, "stolen")
	cl.c.opts.OnNodeError = nil
	err := cl.c.Flows(context.Background(), flow.Filter{}, false, func(flow.Record) error { return nil })
	var ne *NodeError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), "node node-1: ") || !strings.Contains(err.Error(), "answers 401: Unauthorized: token not accepted") ||
		!strings.Contains(err.Error(), "node node-3: ") {
		t.Fatalf("Flows: %v", err)
	}
}

// Following: both nodes' records arrive as they are recorded while node-3 is down; a stream
// that breaks is opened again without repeating what was sent.
func TestFollowOneNodeDown(t *testing.T) {
	cl := newCluster(t, "viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := make(chan flow.Record, 100)
	done := make(chan error, 1)
	go func() {
		done <- cl.c.Flows(ctx, flow.Filter{Verdict: flow.Deny}, true, func(r flow.Record) error { got <- r; return nil })
	}()
	want := func(what string) {
		t.Helper()
		select {
		case r := <-got:
			if r.Node+":"+r.Src.Pod != what {
				t.Fatalf("got %s:%s, want %s", r.Node, r.Src.Pod, what)
			}
		case <-ctx.Done():
			t.Fatalf("no %s", what)
		}
	}
	seen := map[string]bool{}
	for range 2 {
		r := <-got
		seen[r.Node+":"+r.Src.Pod] = true
	}
	if !seen["node-1:a"] || !seen["node-2:a"] {
		t.Fatalf("kept denies: %v", seen)
	}
	cl.nodes["node-2"].live <- rec("node-2", "c", flow.Deny, t0.Add(time.Minute))
	want("node-2:c")
	// node-2's connection breaks: the client opens it again, from after node-2:c.
	cl.srvs["node-2"].CloseClientConnections()
	for len(cl.nodeErrors("node-2")) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("node-2's broken stream was not reported")
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case cl.nodes["node-2"].live <- rec("node-2", "d", flow.Deny, t0.Add(2*time.Minute)):
	case <-ctx.Done():
		t.Fatal("node-2's stream was not opened again")
	}
	want("node-2:d")
	cl.nodes["node-1"].live <- rec("node-1", "e", flow.Deny, t0.Add(3*time.Minute))
	want("node-1:e")
	if e := cl.nodeErrors("node-3"); len(e) == 0 {
		t.Error("node-3 (down) not reported")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Flows returned %v, want the context's end", err)
	}
}

// silentTransport is a node that answers a following request and then says nothing, not
// even a heartbeat, without closing the connection.
type silentTransport struct{}

func (silentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() {
		<-req.Context().Done()
		pw.CloseWithError(req.Context().Err())
	}()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{observe.HeartbeatHeader: {"10ms"}}, Body: pr, Request: req}, nil
}

// A following stream that goes silent is noticed as dead (and, in Flows, opened again).
func TestFollowDeadStream(t *testing.T) {
	cl := newCluster(t, "viewer")
	cl.c.opts.Timeout = 100 * time.Millisecond
	cl.c.http.Transport = silentTransport{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opened, err := cl.c.stream(ctx, target{node: "node-5", addr: "198.51.100.15:9095"}, flow.Filter{}, true, time.Time{}, func(flow.Record) error { return nil })
	if !opened || err == nil || !strings.Contains(err.Error(), "not even a heartbeat") {
		t.Fatalf("silent node: opened %v, %v", opened, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the dead stream was noticed only at the test's deadline")
	}
}

func TestBGPOneNodeDown(t *testing.T) {
	cl := newCluster(t, "viewer")
	replies, err := cl.c.BGP(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range replies {
		switch {
		case r.Reply != nil:
			lines = append(lines, r.Node+" ok "+r.Reply.Node)
		case r.Err != "":
			lines = append(lines, r.Node+" err")
		}
	}
	if got := strings.Join(lines, ", "); got != "node-1 ok node-1, node-2 ok node-2, node-3 err, node-4 err" {
		t.Errorf("BGP: %s (%+v)", got, replies)
	}
	if !strings.Contains(replies[3].Err, "no tabby.dev/observe-address annotation") {
		t.Errorf("node-4: %s", replies[3].Err)
	}
}

// A stream opened again asks for the last interval again and passes on only what it had not.
func TestResume(t *testing.T) {
	var at resume
	if !at.since().IsZero() {
		t.Fatal("a first stream asks for everything")
	}
	a, b := rec("node-1", "a", flow.Deny, t0), rec("node-1", "b", flow.Deny, t0)
	c, d := rec("node-1", "c", flow.Deny, t0), rec("node-1", "d", flow.Deny, t0.Add(time.Second))
	if !at.fresh(a) || !at.fresh(b) {
		t.Fatal("first records not fresh")
	}
	if !at.since().Before(t0) || at.since().Before(t0.Add(-time.Millisecond)) {
		t.Errorf("since %v: want just before %v", at.since(), t0)
	}
	// Opened again: the node sends the last interval again, then what the break cut off.
	if at.fresh(a) || at.fresh(b) {
		t.Error("a record sent twice")
	}
	if !at.fresh(c) || !at.fresh(d) {
		t.Error("a record of the interval the break fell in was lost")
	}
	if at.fresh(c) || at.fresh(rec("node-1", "z", flow.Deny, t0.Add(-time.Second))) {
		t.Error("an older record passed")
	}
}

// Following, a node that joins the Node list is followed too, and one that leaves no more;
// when every node refuses, Flows returns their errors instead of waiting for nothing.
func TestFollowRelists(t *testing.T) {
	cl := newCluster(t, "viewer")
	all, err := cl.c.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	listed := all[:1] // node-1
	cl.c.nodes = func(context.Context) ([]target, error) {
		mu.Lock()
		defer mu.Unlock()
		return listed, nil
	}
	cl.c.relistEvery = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := make(chan flow.Record, 100)
	done := make(chan error, 1)
	go func() {
		done <- cl.c.Flows(ctx, flow.Filter{Verdict: flow.Deny}, true, func(r flow.Record) error { got <- r; return nil })
	}()
	next := func() string {
		t.Helper()
		select {
		case r := <-got:
			return r.Node + ":" + r.Src.Pod
		case <-ctx.Done():
			t.Fatal("no record")
			return ""
		}
	}
	if r := next(); r != "node-1:a" {
		t.Fatalf("got %s, want node-1:a", r)
	}
	mu.Lock()
	listed = all[:2] // node-2 joins
	mu.Unlock()
	if r := next(); r != "node-2:a" {
		t.Fatalf("got %s, want node-2:a from the node that joined", r)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Flows returned %v", err)
	}

	refused := newCluster(t, "stolen")
	// node-1 and node-2 refuse the token, node-4 has no endpoint (node-3, down, would be tried
	// again as long as Flows runs: it may come back).
	refusing, err := refused.c.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	refusing = slices.DeleteFunc(refusing, func(t target) bool { return t.node == "node-3" })
	refused.c.nodes = func(context.Context) ([]target, error) { return refusing, nil }
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	err = refused.c.Flows(ctx2, flow.Filter{}, true, func(flow.Record) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "answers 401") || ctx2.Err() != nil {
		t.Errorf("every node refusing: Flows returned %v (deadline: %v)", err, ctx2.Err())
	}
}
