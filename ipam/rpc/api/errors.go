package api

import (
	"errors"
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
	// ErrNoServer: tabby-node's socket is absent or does not answer; callers fall back to the
	// direct path.
	ErrNoServer = errors.New("tabby-node IPAM service not reachable")
)
