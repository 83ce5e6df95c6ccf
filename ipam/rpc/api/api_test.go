package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tabbynet/tabby/ipam/rpc"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// fake answers every method from a table, or fails with err: a unit test of the wire and the
// error kinds, not of IPAM.
func fake(err error) api.Service {
	return api.Service{
		Assign: func(context.Context, *api.AssignRequest) (*api.AssignReply, error) {
			if err != nil {
				return nil, err
			}
			return &api.AssignReply{Assignment: api.Assignment{IP: netip.MustParseAddr("10.244.0.7"), Block: netip.MustParsePrefix("10.244.0.0/26"), Pool: "p", Overhead: 50, IPIP: true}}, nil
		},
		Release: func(context.Context, *api.ReleaseRequest) (*api.ReleaseReply, error) { return &api.ReleaseReply{}, err },
		Lookup:  func(context.Context, *api.LookupRequest) (*api.LookupReply, error) { return &api.LookupReply{}, err },
		Ready:   func(context.Context, *api.ReadyRequest) (*api.ReadyReply, error) { return &api.ReadyReply{}, err },
		GC: func(context.Context, *api.GCRequest) (*api.GCReply, error) {
			return &api.GCReply{Released: []string{"n.x"}}, err
		},
	}
}

func serve(t testing.TB, svc api.Service) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ipam.sock")
	l, err := rpc.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServerFor(svc)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return sock
}

func TestRoundTrip(t *testing.T) {
	c, err := api.Dial(serve(t, fake(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Assign(context.Background(), &api.AssignRequest{Handle: "n.c", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Assignment.IP.String() != "10.244.0.7" || r.Assignment.Block.String() != "10.244.0.0/26" || r.Assignment.EncapOverhead() != 50 || !r.Assignment.IPIP {
		t.Fatalf("assignment %+v", r.Assignment)
	}
	g, err := c.GC(context.Background(), &api.GCRequest{Node: "a", Network: "n"})
	if err != nil || len(g.Released) != 1 {
		t.Fatalf("GC %+v %v", g, err)
	}
}

func TestErrorKindsCrossTheWire(t *testing.T) {
	for _, kind := range []error{api.ErrUnavailable, api.ErrExhausted, api.ErrNoPool, api.ErrInvalid} {
		c, err := api.Dial(serve(t, fake(errors.Join(kind, errors.New("detail")))))
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
	l, err := rpc.Listen(sock)
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

// slow blocks Assign until released or its context ends, and records how it ended.
type slow struct {
	release chan struct{}
	ended   chan error
}

func (s *slow) service() api.Service {
	svc := fake(nil)
	assign := svc.Assign
	svc.Assign = func(ctx context.Context, r *api.AssignRequest) (*api.AssignReply, error) {
		select {
		case <-s.release:
			s.ended <- nil
			return assign(ctx, r)
		case <-ctx.Done():
			s.ended <- ctx.Err()
			return nil, ctx.Err()
		}
	}
	return svc
}

// The caller's deadline crosses the wire: a plugin that gives up ends the server's call too (an
// Assign then cleans up after itself rather than finishing unseen).
func TestDeadlineReachesServer(t *testing.T) {
	s := &slow{release: make(chan struct{}), ended: make(chan error, 1)}
	c, err := api.Dial(serve(t, s.service()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// Whichever side notices first: the socket's deadline (no reply: ErrNoServer), or the
	// server's answer that its call ran out of time (ErrUnavailable).
	_, err = c.Assign(ctx, &api.AssignRequest{Handle: "n.c", Node: "a"})
	if !(api.IsNoServer(err) && errors.Is(err, context.DeadlineExceeded)) && !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("client: %v, want ErrNoServer or ErrUnavailable after its deadline", err)
	}
	select {
	case err := <-s.ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("server call ended with %v, want its deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server's call outlived the caller's deadline by 5 s")
	}
}

// One Client serves concurrent calls (the benchmark's and tabbyctl's use), and Stop lets a
// call in flight finish with its reply.
func TestConcurrentCallsAndGracefulStop(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ipam.sock")
	l, err := rpc.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	s := &slow{release: make(chan struct{}), ended: make(chan error, 20)}
	srv := rpc.NewServerFor(s.service())
	go srv.Serve(l)
	c, err := api.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			r, err := c.Assign(context.Background(), &api.AssignRequest{Handle: "n.c", Node: "a"})
			if err == nil && r.Assignment.IP.String() != "10.244.0.7" {
				err = fmt.Errorf("reply %+v", r)
			}
			errs <- err
		})
	}
	// Every call is in the server before Stop; Stop must wait for them.
	deadline := time.Now().Add(5 * time.Second)
	for len(s.ended) == 0 && srv.InFlight() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls reached the server", srv.InFlight())
		}
		time.Sleep(time.Millisecond)
	}
	stopped := make(chan struct{})
	go func() { srv.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned with calls in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(s.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call: %v", err)
		}
	}
	<-stopped
}

// A current plugin reads what an agent of the release before says of the pod's MTU: "ipip" alone
// is IPIP's outer header; a reply with neither is no overhead.
func TestAssignmentFromAnOlderAgent(t *testing.T) {
	for wire, want := range map[string]int{
		`{"ip":"10.244.0.7","block":"10.244.0.0/26","pool":"p","ipip":true}`:               20,
		`{"ip":"10.244.0.7","block":"10.244.0.0/26","pool":"p"}`:                           0,
		`{"ip":"10.244.0.7","block":"10.244.0.0/26","pool":"p","overhead":70,"ipip":true}`: 70,
	} {
		var a api.Assignment
		if err := json.Unmarshal([]byte(wire), &a); err != nil {
			t.Fatal(err)
		}
		if got := a.EncapOverhead(); got != want {
			t.Errorf("%s: overhead %d, want %d", wire, got, want)
		}
	}
}
