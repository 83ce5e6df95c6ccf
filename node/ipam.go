package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
	ipamgc "github.com/tabbynet/tabby/ipam/gc"
	ipamrpc "github.com/tabbynet/tabby/ipam/rpc"
	"github.com/tabbynet/tabby/node/installcni"
	"github.com/tabbynet/tabby/node/syncer"
)

func (a *Agent) serveIPAM() (*ipamrpc.Server, error) {
	l, err := ipamrpc.Listen(filepath.Join(a.cfg.RunDir, "ipam.sock"))
	if err != nil {
		return nil, fmt.Errorf("IPAM service: %w", err)
	}
	srv := ipamrpc.NewServer(a.alloc)
	go func() {
		if err := srv.Serve(l); err != nil {
			a.log.Error("IPAM service stopped", "error", err)
		}
	}()
	return srv, nil
}

// runGC releases addresses whose pods are gone (after a grace period and a second look); on the
// node whose name sorts first it also releases deleted nodes' IPAM (ipam/gc, nodes.go).
func (a *Agent) runGC(ctx context.Context) error {
	// Its first look reads the syncer's caches: no round before they hold the cluster.
	if !cache.WaitForCacheSync(ctx.Done(), a.syncer.HasSynced) {
		return nil
	}
	lists := gcLists{KubeStore: ipam.NewKubeStore(a.client).ListsFromCache(), syncer: a.syncer}
	c := ipamgc.New(a.store, a.alloc, ipamgc.Config{Node: a.cfg.NodeName, GracePeriod: a.cfg.GCGrace, Lists: lists, Logger: a.log.With("component", "ipam-gc")})
	if err := c.Run(ctx, a.cfg.GCInterval); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("IPAM GC: %w", err)
	}
	return nil
}

// gcLists is the garbage collector's first look: blocks and Nodes from the syncer's informers
// (no request at all), the rest (this node's pods, handles, affinities) from the API server's
// watch cache. Every node runs a round a minute: consistent lists of every block and every Node
// from each of a thousand nodes would be etcd reading the cluster's IPAM and Nodes whole many
// times a second.
type gcLists struct {
	*ipam.KubeStore
	syncer *syncer.Syncer
}

var errNotSynced = errors.New("the datastore caches have not synced yet")

func (l gcLists) ListBlocks(context.Context) ([]v1.IPAMBlock, error) {
	bs, ok := l.syncer.Blocks()
	if !ok {
		return nil, errNotSynced
	}
	return bs, nil
}

func (l gcLists) ListNodes(context.Context) ([]model.Node, error) {
	ns, ok := l.syncer.Nodes()
	if !ok {
		return nil, errNotSynced
	}
	return ns, nil
}

// runTunnelAddress keeps this node's tunnel addresses (tunl0's, and the VTEP of each family's
// VXLAN device with its MAC) allocated while a pool needs the device, and released when none
// does; felix and the other nodes learn them from the Node annotations the allocator writes. A
// tunnel whose allocation fails is tried again, less often each time, while the others go on.
func (a *Agent) runTunnelAddress(ctx context.Context) error {
	const firstRetry, maxRetry = 5 * time.Second, time.Minute
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	wait := firstRetry
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.tunnelKick:
		case <-retry.C:
		}
		failed := false
		for _, t := range a.tunnel.outOfSync() {
			addr, needed, err := a.alloc.EnsureTunnelAddress(ctx, t, a.cfg.NodeName)
			if err != nil {
				a.log.Error("tunnel address", "tunnel", t.Name, "error", err, "retryIn", wait)
				failed = true
				continue
			}
			a.log.Info("tunnel address", "tunnel", t.Name, "address", addr, "needed", needed)
		}
		if failed {
			retry.Reset(wait)
			wait = min(2*wait, maxRetry)
		} else {
			wait = firstRetry
		}
	}
}

// tunnelNeed follows what decides this node's tunnel addresses: the pools, and this node's
// labels and annotations. The allocator decides the same way (ipam.Tunnel.InSync); this only
// spares it a call per change.
type tunnelNeed struct {
	node  string
	mu    sync.Mutex
	pools map[string]model.Pool
	local *model.Node
}

func newTunnelNeed(node string) *tunnelNeed {
	return &tunnelNeed{node: node, pools: map[string]model.Pool{}}
}

// record takes a change of the stream and tells whether it is one of the inputs.
func (t *tunnelNeed) record(msg any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch m := msg.(type) {
	case model.PoolUpdate:
		t.pools[m.Pool.Name] = m.Pool
	case model.PoolRemove:
		delete(t.pools, m.Name)
	case model.NodeUpdate:
		if m.Node.Name != t.node {
			return false
		}
		n := m.Node
		t.local = &n
	case model.NodeRemove:
		if m.Name != t.node {
			return false
		}
		t.local = nil
	default:
		return false
	}
	return true
}

// outOfSync are the tunnels whose address or MAC this node's Node does not carry as the pools
// say it should; none before the node is known.
func (t *tunnelNeed) outOfSync() []ipam.Tunnel {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.local == nil {
		return nil
	}
	pools := slices.Collect(maps.Values(t.pools))
	var out []ipam.Tunnel
	for _, tun := range ipam.Tunnels {
		if !tun.InSync(*t.local, pools) {
			out = append(out, tun)
		}
	}
	return out
}

// refreshCNIKubeconfig keeps the CNI plugins' kubeconfig (their direct path to the API server
// while tabby-node's socket is down) valid as the service account token rotates.
func (a *Agent) refreshCNIKubeconfig(ctx context.Context) error {
	o := installcni.Defaults()
	o.NodeName = a.cfg.NodeName
	o.HostNetDir, o.KubeconfigName = filepath.Split(a.cfg.CNIKubeconfig)
	o.Logger = a.log.With("component", "install-cni")
	if err := installcni.KeepKubeconfigFresh(ctx, o, 10*time.Minute); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("keep the CNI kubeconfig fresh: %w", err)
	}
	return nil
}
