package ipam

import "errors"

// Sentinels the allocator's errors wrap, so callers (ipam/rpc, the CNI plugins) can tell the
// kinds apart with errors.Is instead of reading the wording.
var (
	// ErrPoolExhausted: no free address in the pools the request may use. Its text is the word
	// the messages read naturally with: "pool 10.244.0.0/24 exhausted: ...".
	ErrPoolExhausted = errors.New("exhausted")
	// ErrNoPool: no enabled IPPool that selects the node (and that the request, pod or namespace
	// names, when they name pools).
	ErrNoPool = errors.New("no usable IPPool")
	// ErrInvalidRequest: the request lacks a field it needs.
	ErrInvalidRequest = errors.New("invalid IPAM request")
)

// kindError carries a message of its own and a sentinel for errors.Is, so existing wording does
// not have to spell the sentinel's text.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
