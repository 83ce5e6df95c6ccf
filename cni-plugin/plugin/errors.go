package plugin

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/tabbynet/tabby/cni-plugin/cnierr"
	"github.com/tabbynet/tabby/cni-plugin/dataplane"
)

var (
	cniError  = cnierr.New
	ipamError = cnierr.IPAM
)

// dataplaneError classifies a netlink/netns failure.
func dataplaneError(step string, err error) *types.Error {
	switch {
	case errors.Is(err, dataplane.ErrNetnsMissing):
		return cniError(types.ErrInvalidNetNS, step+": container network namespace not found", err)
	case errors.Is(err, dataplane.ErrIfNameTaken):
		return cniError(cnierr.InterfaceExists, step+": interface name already in use", err)
	}
	return cniError(cnierr.Dataplane, step+" failed", err)
}

// withUndo appends a failed undo step to an error's details, so the operator sees what may have
// been left behind.
func withUndo(e *types.Error, what string, err error) *types.Error {
	e.Details = fmt.Sprintf("%s; undo %s failed: %v", e.Details, what, err)
	return e
}
