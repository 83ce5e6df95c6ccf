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

// lockedWrites serialises the IPAM writes of the direct path across the node's CNI processes (as
// Calico's ipam.lock does). Without it, ten plugins started together each compare-and-swap the
// same block with no shared cache: one wins per round, new arrivals keep the contention up, and
// some give up after MaxRetries. Serialised, each process's write succeeds at its first try.
func lockedWrites(s api.Service, path string) api.Service {
	s.Assign = locked(path, s.Assign)
	s.Release = locked(path, s.Release)
	return s
}

func locked[Req, Resp any](path string, f api.Func[Req, Resp]) api.Func[Req, Resp] {
	return func(ctx context.Context, r *Req) (*Resp, error) {
		unlock, err := lock(ctx, path)
		if err != nil {
			return nil, err
		}
		defer unlock()
		return f(ctx, r)
	}
}

func lock(ctx context.Context, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("%w: IPAM lock %s: %v", api.ErrUnavailable, path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: IPAM lock %s: %v", api.ErrUnavailable, path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// Closing the file releases the lock, also when the process dies.
			return func() { f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("%w: IPAM lock %s: %v", api.ErrUnavailable, path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%w: waiting for IPAM lock %s: %v", api.ErrUnavailable, path, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
