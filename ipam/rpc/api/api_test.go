package api_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	"github.com/tabbynet/tabby/internal/grpcjson"
	"github.com/tabbynet/tabby/ipam/rpc"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// fake answers from a table; a unit test of the wire and the error kinds, not of IPAM.
type fake struct{ err error }

func (f fake) Assign(_ context.Context, r *api.AssignRequest) (*api.AssignReply, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &api.AssignReply{Assignment: api.Assignment{IP: netip.MustParseAddr("10.244.0.7"), Block: netip.MustParsePrefix("10.244.0.0/26"), Pool: "p", IPIPMode: "Always"}}, nil
}
func (f fake) Release(context.Context, *api.ReleaseRequest) (*api.ReleaseReply, error) {
	return &api.ReleaseReply{}, f.err
}
func (f fake) Lookup(context.Context, *api.LookupRequest) (*api.LookupReply, error) {
	return &api.LookupReply{}, f.err
}
func (f fake) Ready(context.Context, *api.ReadyRequest) (*api.ReadyReply, error) {
	return &api.ReadyReply{}, f.err
}
func (f fake) GC(context.Context, *api.GCRequest) (*api.GCReply, error) {
	return &api.GCReply{Released: []string{"n.x"}}, f.err
}

func serve(t *testing.T, svc api.Service) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ipam.sock")
	l, err := grpcjson.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpcjson.ServerOptions()...)
	rpc.NewServerFor(svc).Register(g)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return sock
}

func TestRoundTrip(t *testing.T) {
	c, err := api.Dial(serve(t, fake{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Assign(context.Background(), &api.AssignRequest{Handle: "n.c", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Assignment.IP.String() != "10.244.0.7" || r.Assignment.Block.String() != "10.244.0.0/26" || r.Assignment.IPIPMode != "Always" {
		t.Fatalf("assignment %+v", r.Assignment)
	}
	g, err := c.GC(context.Background(), &api.GCRequest{Node: "a", Network: "n"})
	if err != nil || len(g.Released) != 1 {
		t.Fatalf("GC %+v %v", g, err)
	}
}

func TestErrorKindsCrossTheWire(t *testing.T) {
	for _, kind := range []error{api.ErrUnavailable, api.ErrExhausted, api.ErrNoPool, api.ErrInvalid} {
		c, err := api.Dial(serve(t, fake{err: errors.Join(kind, errors.New("detail"))}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Assign(context.Background(), &api.AssignRequest{Handle: "n.c", Node: "a"})
		if !errors.Is(err, kind) || api.IsNoServer(err) {
			t.Errorf("server error %v came back as %v", kind, err)
		}
		c.Close()
	}
}

func TestNoServer(t *testing.T) {
	if _, err := api.Dial(filepath.Join(t.TempDir(), "absent.sock")); !api.IsNoServer(err) {
		t.Fatalf("absent socket: %v, want ErrNoServer", err)
	}
	// A stale socket file with nobody listening.
	sock := filepath.Join(t.TempDir(), "stale.sock")
	l, err := grpcjson.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	l.Close()
	c, err := api.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Ready(context.Background(), &api.ReadyRequest{Node: "a"}); !api.IsNoServer(err) {
		t.Fatalf("stale socket: %v, want ErrNoServer", err)
	}
}
