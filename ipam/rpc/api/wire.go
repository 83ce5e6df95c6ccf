package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The wire: one JSON Request, one JSON Reply, newline-delimited. Over tabby-node's unix socket a
// connection carries any number of calls in turn; the plugins' exec fallback sends one on stdin
// and reads one on stdout. Neither gRPC nor HTTP: every CNI ADD and DEL execs the plugin, which
// makes one or two calls on a new connection, and both cost that exec more than the call itself
// (package initialisation, a handshake, header parsing).

// Request is one call.
type Request struct {
	Method string `json:"method"`
	// Kubeconfig and StrictAffinity configure the exec fallback's in-process allocator.
	Kubeconfig     string `json:"kubeconfig,omitempty"`
	StrictAffinity bool   `json:"strictAffinity,omitempty"`
	// Deadline is the caller's: the server's call ends with it (as gRPC's grpc-timeout did), so
	// an Assign whose plugin gave up fails and cleans up after itself instead of finishing
	// unseen.
	Deadline time.Time       `json:"deadline,omitzero"`
	Body     json.RawMessage `json:"body"`
}

// Reply is its answer: Body, or Error with the name of its kind (see kinds).
type Reply struct {
	Body  json.RawMessage `json:"body,omitempty"`
	Kind  string          `json:"kind,omitempty"`
	Error string          `json:"error,omitempty"`
}

// kinds in the order a reply's kind is chosen (the first the error wraps). A deadline the
// server ran into is the datastore not answering in time: unavailable.
var kinds = []struct {
	name string
	err  error
}{
	{"unavailable", ErrUnavailable},
	{"unavailable", context.DeadlineExceeded},
	{"exhausted", ErrExhausted},
	{"nopool", ErrNoPool},
	{"invalid", ErrInvalid},
	{"canceled", context.Canceled},
}

func kindNamed(name string) (error, bool) {
	for _, k := range kinds {
		if k.name == name {
			return k.err, true
		}
	}
	return nil, false
}

// NewReply encodes a call's outcome.
func NewReply(v any, err error) Reply {
	if err != nil {
		r := Reply{Error: err.Error()}
		for _, k := range kinds {
			if errors.Is(err, k.err) {
				r.Kind = k.name
				break
			}
		}
		return r
	}
	body, merr := json.Marshal(v)
	if merr != nil {
		return Reply{Error: fmt.Sprintf("encode reply: %v", merr)}
	}
	return Reply{Body: body}
}

// Decode returns the reply's error, with its kind for errors.Is, or decodes its body into out.
func (r Reply) Decode(out any) error {
	if r.Error != "" {
		if k, ok := kindNamed(r.Kind); ok {
			return &kindError{kind: k, msg: r.Error}
		}
		return errors.New(r.Error)
	}
	return json.Unmarshal(r.Body, out)
}

type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
