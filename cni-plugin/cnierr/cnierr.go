// Package cnierr holds the CNI error codes tabby's plugins return and the mapping of IPAM
// failures to them, shared by tabby and tabby-ipam.
package cnierr

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// Codes besides the spec's well-known ones (types.Err*). 100 and up are plugin-specific.
const (
	// NotAvailable is the spec's STATUS code: the plugin cannot serve ADD now.
	NotAvailable uint = 50

	PoolExhausted   uint = 100 // the usable pools have no free address
	NoUsablePool    uint = 101 // no enabled pool matches this node / the pools configured
	InterfaceExists uint = 102 // CNI_IFNAME (or the host veth name) is taken by something else
	Dataplane       uint = 103 // a netlink or sysctl step failed
	CheckFailed     uint = 104 // CHECK found the attachment incomplete or wrong
)

// New builds the CNI error JSON: msg says what failed, details why.
func New(code uint, msg string, err error) *types.Error {
	d := ""
	if err != nil {
		d = err.Error()
	}
	return types.NewError(code, msg, d)
}

// IPAM classifies an IPAM failure of step.
func IPAM(step string, err error) *types.Error {
	switch {
	case errors.Is(err, api.ErrExhausted):
		return New(PoolExhausted, step+": IP pool exhausted", err)
	case errors.Is(err, api.ErrNoPool):
		return New(NoUsablePool, step+": no usable IP pool", err)
	case errors.Is(err, api.ErrInvalid):
		return New(types.ErrInvalidNetworkConfig, step+": invalid IPAM request", err)
	case errors.Is(err, api.ErrUnavailable), errors.Is(err, api.ErrNoServer), errors.Is(err, context.DeadlineExceeded):
		return New(types.ErrTryAgainLater, step+": IPAM datastore unreachable", err)
	}
	return New(types.ErrInternal, step+" failed", err)
}
