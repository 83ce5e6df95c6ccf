package rpc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// DirectLockPath is the file the direct path's CNI processes of one node lock around their
// writes.
const DirectLockPath = "/run/tabby/ipam-direct.lock"

// nodeLocked serialises the IPAM writes of the direct path across the node's CNI processes (as
// Calico's ipam.lock does). Without it, ten plugins started together each compare-and-swap the
// same block with no shared cache: one wins per round, new arrivals keep the contention up, and
// some give up after MaxRetries. Serialised, each process's write succeeds at its first try.
type nodeLocked struct {
	api.Service
	path string
}

func (l *nodeLocked) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return nil, fmt.Errorf("%w: IPAM lock %s: %v", api.ErrUnavailable, l.path, err)
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: IPAM lock %s: %v", api.ErrUnavailable, l.path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// Closing the file releases the lock, also when the process dies.
			return func() { f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("%w: IPAM lock %s: %v", api.ErrUnavailable, l.path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%w: waiting for IPAM lock %s: %v", api.ErrUnavailable, l.path, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func (l *nodeLocked) Assign(ctx context.Context, r *api.AssignRequest) (*api.AssignReply, error) {
	unlock, err := l.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return l.Service.Assign(ctx, r)
}

func (l *nodeLocked) Release(ctx context.Context, r *api.ReleaseRequest) (*api.ReleaseReply, error) {
	unlock, err := l.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return l.Service.Release(ctx, r)
}
