package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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

// runTunnelAddress keeps this node's tunl0 address allocated while a pool needs IPIP (and released
// when none does); felix learns it from the Node annotation the allocator writes.
func (a *Agent) runTunnelAddress(ctx context.Context) error {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.tunnelKick:
		case <-retry.C:
		}
		if want, have := a.tunnel.state(); want == have {
			continue
		}
		addr, needed, err := a.alloc.EnsureTunnelAddress(ctx, a.cfg.NodeName)
		if err != nil {
			a.log.Error("tunnel address", "error", err)
			retry.Reset(5 * time.Second)
			continue
		}
		a.log.Info("tunnel address", "address", addr, "needed", needed)
	}
}

// tunnelNeed follows what decides whether this node needs an IPIP tunnel address: the pools and
// this node's labels and address. The allocator decides the same way; this only spares it a
// call per change.
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

// state: whether an enabled IPIP pool selects this node, and whether it has a tunnel address.
func (t *tunnelNeed) state() (want, have bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.local == nil {
		return false, false
	}
	for _, p := range t.pools {
		if !p.Disabled && p.IPIP() && p.Matches(t.local.Labels) {
			want = true
		}
	}
	return want, t.local.IPIPTunnelAddr.IsValid()
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
