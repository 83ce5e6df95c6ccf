package ipamclient

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/tabbynet/tabby/ipam/rpc"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// fake counts its calls and answers Assign with 10.244.0.9, or fails every method with err.
type fake struct {
	calls int
	err   error
}

func (f *fake) service() api.Service {
	return api.Service{
		Assign: func(context.Context, *api.AssignRequest) (*api.AssignReply, error) {
			f.calls++
			if f.err != nil {
				return nil, f.err
			}
			return &api.AssignReply{Assignment: api.Assignment{IP: netip.MustParseAddr("10.244.0.9")}}, nil
		},
		Ready: func(context.Context, *api.ReadyRequest) (*api.ReadyReply, error) {
			f.calls++
			return &api.ReadyReply{}, f.err
		},
	}
}

func TestFallsBackWhenNoSocket(t *testing.T) {
	d := &fake{}
	c := Open(Options{Socket: filepath.Join(t.TempDir(), "absent.sock"), Direct: func(context.Context, string, bool) (api.Service, error) { return d.service(), nil }})
	defer c.Close()
	r, err := c.Assign(context.Background(), &api.AssignRequest{Handle: "n.c", Node: "a"})
	if err != nil || r.Assignment.IP.String() != "10.244.0.9" || c.Path != "direct" || d.calls != 1 {
		t.Fatalf("assign %+v %v path %q calls %d", r, err, c.Path, d.calls)
	}
}

func TestNoDirectPathIsUnavailable(t *testing.T) {
	c := Open(Options{Socket: "none"})
	_, err := c.Ready(context.Background(), &api.ReadyRequest{Node: "a"})
	if !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}

// The exec transport keeps error kinds: what tabby-ipam's allocator says reaches tabby intact.
func TestServeExecKeepsKinds(t *testing.T) {
	in := bytes.NewBufferString(`{"method":"Assign","kubeconfig":"/k","body":{"handle":"n.c","node":"a"}}`)
	var out bytes.Buffer
	open := func(_ context.Context, kc string, _ bool) (api.Service, error) {
		if kc != "/k" {
			t.Errorf("kubeconfig %q not passed", kc)
		}
		return (&fake{err: errors.Join(api.ErrExhausted, errors.New("pool p exhausted"))}).service(), nil
	}
	if err := ServeExec(context.Background(), "Assign", open, in, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte(`"kind":"exhausted"`)) {
		t.Fatalf("reply %s lacks the kind", out.Bytes())
	}
	out.Reset()
	in = bytes.NewBufferString(`{"method":"Nope","kubeconfig":"/k","body":{}}`)
	ServeExec(context.Background(), "Nope", open, in, &out)
	if !bytes.Contains(out.Bytes(), []byte(`"kind":"invalid"`)) {
		t.Fatalf("unknown method reply %s", out.Bytes())
	}
}

func serveFake(t *testing.T, svc api.Service) (socket string, stop func()) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "ipam.sock")
	l, err := rpc.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServerFor(svc)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return socket, srv.Stop
}

// What tabby-node answers is final, errors included: a full pool on tabby-node is full for the
// API server too, so the plugin does not ask again the slow way.
func TestSocketAnswerIsFinal(t *testing.T) {
	node := &fake{err: errors.Join(api.ErrExhausted, errors.New("pool p exhausted"))}
	socket, _ := serveFake(t, node.service())
	d := &fake{}
	c := Open(Options{Socket: socket, Direct: func(context.Context, string, bool) (api.Service, error) { return d.service(), nil }})
	defer c.Close()
	_, err := c.Assign(context.Background(), &api.AssignRequest{Handle: "n.c", Node: "a"})
	if !errors.Is(err, api.ErrExhausted) || c.Path != "socket" || node.calls != 1 || d.calls != 0 {
		t.Fatalf("assign: %v, path %q, tabby-node calls %d, direct calls %d", err, c.Path, node.calls, d.calls)
	}
}

// tabby-node stopping between two calls of one invocation (a restart): the second call goes
// the direct way, and so does every later one.
func TestFallsBackWhenTabbyNodeStops(t *testing.T) {
	node := &fake{}
	socket, stop := serveFake(t, node.service())
	d := &fake{}
	c := Open(Options{Socket: socket, Direct: func(context.Context, string, bool) (api.Service, error) { return d.service(), nil }})
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Assign(ctx, &api.AssignRequest{Handle: "n.c", Node: "a"}); err != nil || c.Path != "socket" {
		t.Fatalf("first call: %v via %q", err, c.Path)
	}
	stop()
	for i := range 2 {
		if _, err := c.Ready(ctx, &api.ReadyRequest{Node: "a"}); err != nil || c.Path != "direct" {
			t.Fatalf("call %d after the stop: %v via %q", i, err, c.Path)
		}
	}
	if node.calls != 1 || d.calls != 2 {
		t.Fatalf("tabby-node served %d calls, the direct path %d; want 1 and 2", node.calls, d.calls)
	}
}
