package rpc

import (
	"context"
	"fmt"
	"time"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// OpenLocal builds the service (NewLocal) over the API server named by a kubeconfig path ("" =
// the usual lookup): the plugins' direct path. Pools and node labels are read once per
// invocation anyway, so the allocator's cache settings do not matter here. Lists come from the
// API server's watch cache (KubeStore.ListsFromCache): a consistent one is a read of etcd that
// every invocation would wait for.
func OpenLocal(_ context.Context, kubeconfig string, strictAffinity bool) (api.Service, error) {
	cfg, err := client.LoadConfig(kubeconfig, "")
	if err != nil {
		return api.Service{}, fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	// A CNI invocation must fail (and be retried by the kubelet) rather than hang on a dead
	// API server.
	if cfg.Timeout == 0 {
		cfg.Timeout = 15 * time.Second
	}
	c, err := client.New(cfg)
	if err != nil {
		return api.Service{}, fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	alloc := ipam.New(ipam.NewKubeStore(c).ListsFromCache(), ipam.Config{StrictAffinity: strictAffinity})
	return lockedWrites(NewLocal(alloc), DirectLockPath), nil
}
