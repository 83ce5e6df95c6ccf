package api

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kinds of failure the plugins report with different CNI error codes. Errors from either path
// (socket or in-process) wrap exactly one of them, so errors.Is works the same for both.
var (
	// ErrUnavailable: the datastore (the API server) could not be reached or answered in time.
	ErrUnavailable = errors.New("IPAM datastore unavailable")
	// ErrExhausted: the pools that may be used have no free address.
	ErrExhausted = errors.New("IP pool exhausted")
	// ErrNoPool: no enabled pool matches this node (or the pools requested).
	ErrNoPool = errors.New("no usable IP pool")
	// ErrInvalid: the request itself is wrong (empty handle, unknown pool...).
	ErrInvalid = errors.New("invalid IPAM request")
	// ErrNoServer: tabby-node's socket is absent or does not answer; callers fall back to Local.
	ErrNoServer = errors.New("tabby-node IPAM service not reachable")
)

// serverMark starts every status message the server sends, so a client can tell "the server
// answered Unavailable" (datastore down: do not retry in-process against the same API server)
// from "no server behind the socket" (gRPC's own Unavailable: fall back).
const serverMark = "tabby-node: "

// ToStatus turns a service error into a gRPC status that keeps its kind.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Internal
	switch {
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		code = codes.Unavailable
	case errors.Is(err, ErrExhausted):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrNoPool):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, serverMark+err.Error())
}

// FromStatus turns a gRPC error back into an error wrapping its kind.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	msg, fromServer := strings.CutPrefix(st.Message(), serverMark)
	if !fromServer {
		// gRPC's own failure (socket refused, connection reset, deadline before an answer).
		return fmt.Errorf("%w: %s", ErrNoServer, st.Message())
	}
	var kind error
	switch st.Code() {
	case codes.Unavailable:
		kind = ErrUnavailable
	case codes.ResourceExhausted:
		kind = ErrExhausted
	case codes.FailedPrecondition:
		kind = ErrNoPool
	case codes.InvalidArgument:
		kind = ErrInvalid
	case codes.Canceled:
		kind = context.Canceled
	default:
		return errors.New(msg)
	}
	// The server's message already names the kind; keep it as sent.
	return &kindError{kind: kind, msg: msg}
}

type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
