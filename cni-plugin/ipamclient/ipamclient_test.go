package ipamclient

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

type fake struct {
	calls int
	err   error
}

func (f *fake) Assign(context.Context, *api.AssignRequest) (*api.AssignReply, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return &api.AssignReply{Assignment: api.Assignment{IP: netip.MustParseAddr("10.244.0.9")}}, nil
}
func (f *fake) Release(context.Context, *api.ReleaseRequest) (*api.ReleaseReply, error) {
	f.calls++
	return &api.ReleaseReply{}, f.err
}
func (f *fake) Lookup(context.Context, *api.LookupRequest) (*api.LookupReply, error) {
	f.calls++
	return &api.LookupReply{}, f.err
}
func (f *fake) Ready(context.Context, *api.ReadyRequest) (*api.ReadyReply, error) {
	f.calls++
	return &api.ReadyReply{}, f.err
}
func (f *fake) GC(context.Context, *api.GCRequest) (*api.GCReply, error) {
	f.calls++
	return &api.GCReply{}, f.err
}

func TestFallsBackWhenNoSocket(t *testing.T) {
	d := &fake{}
	c := Open(Options{Socket: filepath.Join(t.TempDir(), "absent.sock"), Direct: func(context.Context, string, bool) (api.Service, error) { return d, nil }})
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
		return &fake{err: errors.Join(api.ErrExhausted, errors.New("pool p exhausted"))}, nil
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
