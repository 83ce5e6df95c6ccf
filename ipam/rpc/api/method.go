package api

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Func is one method of the Service: what its callers call and what implements it.
type Func[Req, Resp any] func(ctx context.Context, r *Req) (*Resp, error)

// Transport carries a call to where its method runs: tabby-node's unix socket (Client), the
// tabby plugin's exec of tabby-ipam (cni-plugin/ipamclient), or this process (InProcess).
type Transport interface {
	// Invoke runs the Service method named method: req is its *Request, resp its *Reply, filled
	// in on success. Errors wrap the kinds of errors.go.
	Invoke(ctx context.Context, method string, req, resp any) error
}

// method is what the transports need of a Service field, whatever its types: every Func is one.
type method interface {
	over(t Transport, name string) reflect.Value
	newRequest() any
	newReply() any
	call(ctx context.Context, req, resp any) error
	implemented() bool
}

func (Func[Req, Resp]) over(t Transport, name string) reflect.Value {
	return reflect.ValueOf(Func[Req, Resp](func(ctx context.Context, r *Req) (*Resp, error) {
		out := new(Resp)
		if err := t.Invoke(ctx, name, r, out); err != nil {
			return nil, err
		}
		return out, nil
	}))
}

func (Func[Req, Resp]) newRequest() any { return new(Req) }
func (Func[Req, Resp]) newReply() any   { return new(Resp) }
func (f Func[Req, Resp]) implemented() bool {
	return f != nil
}

func (f Func[Req, Resp]) call(ctx context.Context, req, resp any) error {
	r, rok := req.(*Req)
	out, ook := resp.(*Resp)
	if !rok || !ook {
		return fmt.Errorf("%w: %T and %T are not this method's request and reply", ErrInvalid, req, resp)
	}
	got, err := f(ctx, r)
	if got != nil {
		*out = *got
	}
	return err
}

// fields are Service's methods by name, as zero Funcs: their types, for decoding a request.
var fields = func() map[string]method {
	t := reflect.TypeFor[Service]()
	out := make(map[string]method, t.NumField())
	v := reflect.ValueOf(Service{})
	for i := range t.NumField() {
		m, ok := v.Field(i).Interface().(method)
		if !ok {
			panic(fmt.Sprintf("api.Service.%s is a %s, not a Func", t.Field(i).Name, t.Field(i).Type))
		}
		out[t.Field(i).Name] = m
	}
	return out
}()

// Connect is the Service whose every method goes over t. Service's fields are walked once, here;
// a call runs a typed closure, without reflection.
func Connect(t Transport) Service {
	var s Service
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		v.Field(i).Set(fields[name].over(t, name))
	}
	return s
}

// InProcess is the Transport that runs s's methods in this process, without encoding: what a
// server hands its decoded requests to, and the plugins' direct path.
func InProcess(s Service) Transport {
	v := reflect.ValueOf(s)
	t := make(inProcess, v.NumField())
	for i := range v.NumField() {
		t[v.Type().Field(i).Name] = v.Field(i).Interface().(method)
	}
	return t
}

type inProcess map[string]method

func (t inProcess) Invoke(ctx context.Context, name string, req, resp any) error {
	m, ok := t[name]
	if !ok {
		return fmt.Errorf("%w: %q is not a method", ErrInvalid, name)
	}
	if !m.implemented() {
		return fmt.Errorf("%w: %s is not implemented here", ErrInvalid, name)
	}
	return m.call(ctx, req, resp)
}

// Dispatch decodes body as method's request and invokes it on t: the serving half of a wire
// transport (tabby-node's socket, tabby-ipam's exec).
func Dispatch(ctx context.Context, t Transport, method string, body json.RawMessage) (any, error) {
	m, ok := fields[method]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a method", ErrInvalid, method)
	}
	req := m.newRequest()
	if err := json.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("%w: decode %s request: %v", ErrInvalid, method, err)
	}
	resp := m.newReply()
	if err := t.Invoke(ctx, method, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}
