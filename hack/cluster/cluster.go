// Package cluster runs a real Kubernetes cluster on one machine for tabby: the lab's network
// (node namespaces on a switch, a router, the control plane on the underlay) with a real
// containerd, kubelet and kube-proxy on every node, a controller-manager, a scheduler and
// CoreDNS, and tabby installed by `helm install` of charts/tabby from images built here (no
// registry is reachable). It is what `make cluster` starts and what the upstream e2e tests run
// against.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/proc"
	"github.com/tabbynet/tabby/internal/testenv"
)

// Options describe a cluster.
type Options struct {
	// ID names the lab underneath (tl-<ID>-…); random when empty.
	ID string
	// Nodes is the number of nodes (node-1, node-2, …); 2 when zero.
	Nodes int
	// TabbyBin holds the tabby binaries the image is made of; $TABBY_BIN or <repo>/bin when empty.
	TabbyBin string
	// HelmSet are extra `--set` values for the chart.
	HelmSet []string
	// Encap is the pod network's encapsulation: "" or "none" (native routes over BGP) or "vxlan"
	// (the pool in VXLAN, no BGP on any node).
	Encap string
	// NoTabby leaves the chart uninstalled (Install does it later).
	NoTabby bool
	Log     *slog.Logger
}

// Cluster is a running cluster.
type Cluster struct {
	Lab   *lab.Lab
	Nodes []*Node
	// Kubeconfig is an admin kubeconfig that works from the root namespace.
	Kubeconfig string
	// Images are the archives imported into every node's containerd.
	Images []string
	// ImageTag is the tag of tabby's image (the chart's image.tag).
	ImageTag string

	opts        Options
	log         *slog.Logger
	controllers []*proc.Proc
	mntDir      string
	mu          sync.Mutex
	madeDirs    []string           // mount points made on the host
	stopRoutes  context.CancelFunc // keepBlockRoutes
	closeOnce   sync.Once
	closeErr    error
}

// ImageTag is the tag under which the cluster's tabby image is imported.
const ImageTag = "cluster"

// Up starts a cluster and returns when every node is Ready with tabby-node running on it (or,
// with NoTabby, when every node is registered). On error everything made so far is removed.
func Up(ctx context.Context, o Options) (_ *Cluster, err error) {
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	for _, b := range []string{"kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := cacheBinary(b); err != nil {
			return nil, err
		}
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return nil, fmt.Errorf("runc not found: run `make deps`")
	}
	start := time.Now()
	l, err := lab.New(ctx, lab.Options{ID: o.ID, TabbyBin: o.TabbyBin, HostLink: true, KubeletNodes: true, Log: o.Log})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Lab: l, Kubeconfig: l.Kubecfg, opts: o, log: o.Log, ImageTag: ImageTag}
	defer func() {
		if err != nil {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			c.log.Error("cluster up failed", "err", err, "diagnostics", "\n"+c.Diagnostics(dctx))
			dcancel()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = c.Close(cctx)
		}
	}()
	c.log.Info("control plane up", "api", l.Env.URL, "took", time.Since(start).Round(time.Millisecond))
	if err := c.startControllers(); err != nil {
		return nil, err
	}
	if c.Images, err = c.buildImages(ctx); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	c.mntDir = filepath.Join(l.Dir, "mnt")
	if err := privateDir(ctx, c.mntDir); err != nil {
		return nil, err
	}
	specs := make([]lab.NodeSpec, o.Nodes)
	for i := range specs {
		specs[i] = lab.NodeSpec{Name: fmt.Sprintf("node-%d", i+1)}
	}
	labNodes, err := l.AddNodes(ctx, specs...)
	if err != nil {
		return nil, err
	}
	for _, ln := range labNodes {
		c.Nodes = append(c.Nodes, &Node{
			Node: ln, cluster: c,
			MountNS:        filepath.Join(c.mntDir, ln.Name),
			Root:           filepath.Join(ln.Dir, "root"),
			CgroupRoot:     "/" + l.NetnsName(ln.Name),
			ContainerdSock: filepath.Join(ln.Dir, "root", "containerd", "containerd.sock"),
		})
	}
	if err := c.eachNode(func(n *Node) error { return n.boot(ctx) }); err != nil {
		return nil, err
	}
	if err := c.waitNodesRegistered(ctx); err != nil {
		return nil, err
	}
	if err := c.routePodsFromHost(ctx); err != nil {
		return nil, err
	}
	if o.Encap == "vxlan" {
		rctx, stop := context.WithCancel(context.Background())
		c.stopRoutes = stop
		go c.keepBlockRoutes(rctx)
	}
	c.log.Info("kubelets registered", "nodes", len(c.Nodes), "took", time.Since(start).Round(time.Millisecond))
	if o.NoTabby {
		return c, nil
	}
	if err := c.InstallTabby(ctx); err != nil {
		return nil, err
	}
	if err := c.installDNS(ctx); err != nil {
		return nil, err
	}
	c.log.Info("cluster ready", "nodes", len(c.Nodes), "took", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// boot gives the node its filesystem and cgroups, and starts containerd (with the images),
// kubelet and kube-proxy.
func (n *Node) boot(ctx context.Context) error {
	if err := os.MkdirAll(n.Root, 0o755); err != nil {
		return err
	}
	if err := n.makeFilesystem(ctx); err != nil {
		return err
	}
	if err := n.makeCgroups(); err != nil {
		return err
	}
	if err := n.installReferencePlugins(ctx); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.importImages(ctx, n.cluster.Images); err != nil {
		return err
	}
	if err := n.startKubelet(); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.startKubeProxy(); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

func (c *Cluster) eachNode(f func(*Node) error) error {
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(n) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// routePodsFromHost gives the root namespace, where the API server runs, a route to the pod
// network through the first node, as a control-plane node running tabby has one: the API server
// proxies to pods and Services (`kubectl proxy`, the pods/proxy subresource). The route goes with
// the host link. Replies need no route back: the nodes reach the API server on their subnet, and
// tabby's NAT outgoing leaves connections that did not start in a pod alone.
func (c *Cluster) routePodsFromHost(ctx context.Context) error {
	return run(ctx, "ip", "route", "add", lab.PodCIDR.String(), "via", c.Nodes[0].IP().String(), "dev", c.Lab.HostLinkName())
}

// startControllers starts kube-controller-manager and kube-scheduler in the root namespace.
func (c *Cluster) startControllers() error {
	env := c.Lab.Env
	cm, err := cacheBinary("kube-controller-manager")
	if err != nil {
		return err
	}
	sched, err := cacheBinary("kube-scheduler")
	if err != nil {
		return err
	}
	dir := filepath.Join(c.Lab.Dir, "controlplane")
	p, err := startProc("kube-controller-manager", filepath.Join(dir, "kube-controller-manager.log"), "", "", nil, cm,
		"--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--service-account-private-key-file="+env.SAKey, "--root-ca-file="+env.ServingCert,
		"--use-service-account-credentials=true", "--allocate-node-cidrs=false",
		"--service-cluster-ip-range="+testenv.ServiceCIDR, "--v=1")
	if err != nil {
		return err
	}
	c.controllers = append(c.controllers, p)
	p, err = startProc("kube-scheduler", filepath.Join(dir, "kube-scheduler.log"), "", "", nil, sched,
		"--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--v=1")
	if err != nil {
		return err
	}
	c.controllers = append(c.controllers, p)
	return nil
}

// Close stops every component and removes everything the cluster made. Safe to call twice.
func (c *Cluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		if c.stopRoutes != nil {
			c.stopRoutes()
		}
		var errs []error
		if err := c.eachNode(func(n *Node) error { return n.stop(ctx) }); err != nil {
			errs = append(errs, err)
		}
		for _, p := range c.controllers {
			_ = p.Stop(syscall.SIGTERM, 5*time.Second) // a component that needed SIGKILL is gone all the same
		}
		if c.mntDir != "" {
			if err := syscall.Unmount(c.mntDir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", c.mntDir, err))
			}
		}
		for _, d := range slices.Backward(c.madeDirs) {
			_ = os.Remove(d) // only if still empty; a directory before its parent
		}
		if err := c.Lab.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// privateDir makes dir a mount point of its own with private propagation: a mount namespace
// can be kept by a bind mount only on such a mount.
func privateDir(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := run(ctx, "mount", "--bind", dir, dir); err != nil {
		return err
	}
	return run(ctx, "mount", "--make-private", dir)
}

// cacheBinary is a binary hack/controlplane/build.sh built into the cache.
func cacheBinary(name string) (string, error) {
	p := filepath.Join(testenv.BinDir(), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found at %s: run `make cluster-deps`", name, p)
	}
	return p, nil
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
