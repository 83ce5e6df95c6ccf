package api_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// recorder is a Transport that answers every method with an empty reply and notes its name.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) Invoke(_ context.Context, method string, _, _ any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, method)
	return nil
}

// callEvery calls every method of svc with an empty request, in field order, and returns the
// methods' names.
func callEvery(t *testing.T, svc api.Service) []string {
	t.Helper()
	v := reflect.ValueOf(svc)
	var names []string
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		if f.IsNil() {
			t.Fatalf("%s: no function", name)
		}
		out := f.Call([]reflect.Value{reflect.ValueOf(context.Background()), reflect.New(f.Type().In(1).Elem())})
		if err, _ := out[1].Interface().(error); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out[0].IsNil() {
			t.Fatalf("%s: no reply and no error", name)
		}
		names = append(names, name)
	}
	return names
}

// Every method of Service, today's and any added later, reaches the server under its own name
// over the socket, and comes back with a reply: nothing per method in the client, the server or
// the wire.
func TestEveryMethodCrossesTheSocket(t *testing.T) {
	rec := &recorder{}
	c, err := api.Dial(serve(t, api.Connect(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	called := callEvery(t, c.Service)
	if !reflect.DeepEqual(rec.calls, called) {
		t.Fatalf("the server saw %v, the client called %v", rec.calls, called)
	}
}

// The same through this process (the direct path): the request and reply are passed, not
// encoded, and an error keeps its chain.
func TestEveryMethodInProcess(t *testing.T) {
	rec := &recorder{}
	svc := api.Connect(api.InProcess(api.Connect(rec)))
	called := callEvery(t, svc)
	if !reflect.DeepEqual(rec.calls, called) {
		t.Fatalf("the implementation saw %v, the caller called %v", rec.calls, called)
	}
	cause := errors.New("detail")
	_, err := api.Connect(api.InProcess(fake(errors.Join(api.ErrExhausted, cause)))).Assign(context.Background(), &api.AssignRequest{})
	if !errors.Is(err, api.ErrExhausted) || !errors.Is(err, cause) {
		t.Fatalf("in-process error %v lost its chain", err)
	}
}

// A method the serving side leaves out (a nil field: a tabby-node older than its plugin, or a
// fake) is an invalid request for its caller, on either transport, not a missing server the
// plugin would fall back from.
func TestUnimplementedMethod(t *testing.T) {
	partial := api.Service{Assign: fake(nil).Assign}
	c, err := api.Dial(serve(t, partial))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, svc := range map[string]api.Service{"socket": c.Service, "in process": api.Connect(api.InProcess(partial))} {
		if _, err := svc.Assign(context.Background(), &api.AssignRequest{}); err != nil {
			t.Errorf("%s: Assign: %v", name, err)
		}
		if _, err := svc.Ready(context.Background(), &api.ReadyRequest{}); !errors.Is(err, api.ErrInvalid) || api.IsNoServer(err) {
			t.Errorf("%s: unimplemented Ready: %v, want ErrInvalid", name, err)
		}
	}
	// A method this side of the wire does not know (a newer plugin).
	if _, err := api.Dispatch(context.Background(), api.InProcess(partial), "Drain", []byte(`{}`)); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("unknown method: %v, want ErrInvalid", err)
	}
	if err := c.Invoke(context.Background(), "Drain", &api.ReadyRequest{}, &api.ReadyReply{}); !errors.Is(err, api.ErrInvalid) || api.IsNoServer(err) {
		t.Errorf("unknown method over the socket: %v, want ErrInvalid", err)
	}
}
