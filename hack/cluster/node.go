package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/proc"
	"github.com/tabbynet/tabby/internal/testenv"
)

// Node is a lab node run by a real kubelet and containerd. Two kubelets on one machine must not
// see each other's files, so every node has its own mount namespace in which the paths a node
// owns (privatePaths) are its own directories; network namespace, cgroup root and data
// directories are per node too. The host's files, mounts and sysctls are left as they are.
type Node struct {
	*lab.Node
	// MountNS is the node's mount namespace, kept by a bind mount of its nsfs file.
	MountNS string
	// Root holds the node's private directories, its configs and logs.
	Root string
	// CgroupRoot is kubelet's cgroupRoot: every pod of the node lives below it.
	CgroupRoot string
	// ContainerdSock is the node's containerd (CRI) socket.
	ContainerdSock string

	cluster    *Cluster
	containerd *proc.Proc
	kubelet    *proc.Proc
	proxy      *proc.Proc
}

// privatePaths are the host paths a node has its own copy of, by directory under Root. They are
// where the chart's hostPath volumes point (CNI binaries and config, tabby-node's sockets), where
// containerd keeps pod network namespaces, and where kubelet writes pod logs.
var privatePaths = []struct{ dir, at string }{
	{"opt", "/opt"},                       // /opt/cni/bin: the CNI plugins (install-cni copies tabby's)
	{"etc-cni", "/etc/cni"},               // /etc/cni/net.d: the conflist
	{"run-tabby", "/run/tabby"},           // ipam.sock, bird.sock, the plugins' direct-path lock
	{"run-netns", "/run/netns"},           // the pods' network namespaces
	{"run-containerd", "/run/containerd"}, // the shims' sockets (a fixed path of containerd's)
	{"var-log", "/var/log"},               // /var/log/pods, /var/log/containers
	// kubelet's device plugin socket: a fixed path, whatever --root-dir says. Two kubelets
	// sharing it raced to remove and bind it, and one failed to start ("address already in use").
	{"device-plugins", "/var/lib/kubelet/device-plugins"},
}

// kernelTunables are the global sysctls kubelet sets at start (vm.overcommit_memory=1,
// kernel.panic=10, kernel.panic_on_oops=1, …). They are not per network namespace: writing them
// would change the whole machine. The node's mount namespace shows kubelet a file holding the
// value it wants instead, so it finds nothing to change.
var kernelTunables = map[string]string{
	"/proc/sys/vm/overcommit_memory":      "1",
	"/proc/sys/kernel/panic":              "10",
	"/proc/sys/kernel/panic_on_oops":      "1",
	"/proc/sys/kernel/keys/root_maxkeys":  "1000000",
	"/proc/sys/kernel/keys/root_maxbytes": "25000000",
}

// makeFilesystem creates the node's mount namespace and mounts its private paths in it.
func (n *Node) makeFilesystem(ctx context.Context) error {
	if err := os.WriteFile(n.MountNS, nil, 0o600); err != nil {
		return err
	}
	if err := run(ctx, "unshare", "--mount="+n.MountNS, "--propagation", "private", "true"); err != nil {
		return fmt.Errorf("node %s: mount namespace: %w", n.Name, err)
	}
	for _, p := range privatePaths {
		src := filepath.Join(n.Root, p.dir)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		if err := n.cluster.ensureMountpoint(p.at); err != nil {
			return err
		}
		if err := run(ctx, "nsenter", "--mount="+n.MountNS, "--", "mount", "--bind", src, p.at); err != nil {
			return fmt.Errorf("node %s: private %s: %w", n.Name, p.at, err)
		}
	}
	tun := filepath.Join(n.Root, "sysctl")
	if err := os.MkdirAll(tun, 0o755); err != nil {
		return err
	}
	for path, val := range kernelTunables {
		f := filepath.Join(tun, strings.ReplaceAll(strings.TrimPrefix(path, "/proc/sys/"), "/", "."))
		if err := os.WriteFile(f, []byte(val+"\n"), 0o644); err != nil {
			return err
		}
		if err := run(ctx, "nsenter", "--mount="+n.MountNS, "--", "mount", "--bind", f, path); err != nil {
			return fmt.Errorf("node %s: mask %s: %w", n.Name, path, err)
		}
	}
	return os.MkdirAll(filepath.Join(n.Root, "opt", "cni", "bin"), 0o755)
}

// installReferencePlugins puts the standard CNI plugins into the node's /opt/cni/bin, as a
// node's OS packages (kubernetes-cni) do: containerd wires every pod's loopback with the
// loopback plugin, and the pod start benchmark compares tabby with ptp + host-local.
func (n *Node) installReferencePlugins(ctx context.Context) error {
	ref, err := lab.ReferencePlugins(ctx)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(ref)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(ref, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(n.Root, "opt", "cni", "bin", e.Name()), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// ensureMountpoint creates an empty directory for a private path the host does not have
// (/etc/cni, say). Nothing is written into it on the host side, and Close removes it.
func (c *Cluster) ensureMountpoint(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.makeDirs(dir)
}

// makeDirs makes dir and its missing parents, each recorded for removal; c.mu is held.
func (c *Cluster) makeDirs(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := c.makeDirs(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	c.madeDirs = append(c.madeDirs, dir)
	return nil
}

// makeCgroups creates the node's cgroup root in every cgroup v1 hierarchy (kubelet wants it to
// exist). The machine's own cgroups are left alone.
func (n *Node) makeCgroups() error {
	for _, h := range cgroupHierarchies(false) {
		dir := filepath.Join(h, n.CgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("node %s: cgroup %s: %w", n.Name, dir, err)
		}
		if filepath.Base(h) == "cpuset" {
			// A new cpuset has no CPUs and no memory nodes until given its parent's.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("node %s: %s: %w", n.Name, f, err)
				}
			}
		}
	}
	return nil
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (not the cpu,cpuacct style
// symlinks), and with unified the v2 one of a hybrid host too: kubelet makes the node's cgroup
// root there as well, so it must go at the end, but it need not exist at the start.
func cgroupHierarchies(unified bool) []string {
	ents, err := os.ReadDir(cgroupFS)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || (e.Name() == "unified" && !unified) {
			continue
		}
		out = append(out, filepath.Join(cgroupFS, e.Name()))
	}
	return out
}

const cgroupFS = "/sys/fs/cgroup"

// startContainerd starts the node's containerd with its own root, state and sockets.
func (n *Node) startContainerd(ctx context.Context) error {
	// The shim is looked up on PATH; runc comes from the distribution.
	env := []string{"PATH=" + testenv.BinDir() + ":" + os.Getenv("PATH")}
	var err error
	if n.containerd, err = n.startComponent("containerd", "containerd.toml", containerdConfig(n), env); err != nil {
		return err
	}
	return lab.Eventually(ctx, 60*time.Second, func(context.Context) error {
		if !n.containerd.Running() {
			return lab.Stop(n.containerd.ExitError())
		}
		_, err := n.ctr(ctx, "version")
		return err
	})
}

func containerdConfig(n *Node) string {
	d := filepath.Join(n.Root, "containerd")
	return fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"

# Without CAP_SYS_RESOURCE (this machine's root lacks it) no process may lower its OOM score
# below its parent's, and kubelet asks -998 for system-node-critical pods such as tabby-node:
# keep the scores at containerd's own instead.
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = false

# NRI's socket is one fixed path for the whole machine.
[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/opt/cni/bin"]
  conf_dir = "/etc/cni/net.d"
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.ContainerdSock, n.ContainerdSock+".ttrpc")
}

// ctr runs containerd's CLI against the node's containerd, in the CRI's namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	bin, err := cacheBinary("ctr")
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, bin, append([]string{"--address", n.ContainerdSock, "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// importImages loads image archives into the node's containerd (no registry is reachable).
func (n *Node) importImages(ctx context.Context, archives []string) error {
	for _, a := range archives {
		if _, err := n.ctr(ctx, "images", "import", "--no-unpack=false", a); err != nil {
			return fmt.Errorf("node %s: import %s: %w", n.Name, filepath.Base(a), err)
		}
	}
	return nil
}

// startKubelet writes the kubelet's configuration and starts it.
func (n *Node) startKubelet() (err error) {
	n.kubelet, err = n.startComponent("kubelet", "kubelet.yaml", kubeletConfig(n), nil,
		"--kubeconfig="+n.Kubeconfig, "--hostname-override="+n.Name,
		"--node-ip="+n.IP().String(), "--root-dir="+filepath.Join(n.Root, "kubelet"), "--v=1")
	return err
}

// startComponent writes a component's configuration file into the node's root and starts the
// component (a binary of the cache) in the node's namespaces with --config=<file> and args, its
// log beside the configuration.
func (n *Node) startComponent(name, file, config string, env []string, args ...string) (*proc.Proc, error) {
	cfg := filepath.Join(n.Root, file)
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return nil, err
	}
	bin, err := cacheBinary(name)
	if err != nil {
		return nil, err
	}
	argv := append([]string{bin, "--config=" + cfg}, args...)
	return startProc(name, filepath.Join(n.Root, name+".log"), n.MountNS, lab.NetnsPath(n.NS), env, argv...)
}

func kubeletConfig(n *Node) string {
	sock := "unix://" + n.ContainerdSock
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines run cgroup v1 without systemd as PID 1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
failSwapOn: false
containerRuntimeEndpoint: %s
imageServiceEndpoint: %s
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
# The API server reaches kubelets for exec, logs and port-forward without a client certificate.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
clusterDomain: %s
# Pods resolve names through the cluster's CoreDNS (installDNS).
clusterDNS: [%s]
# The disk is shared with everything else on the machine: evict for it only when it is full.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
serializeImagePulls: false
maxPods: 150
`, n.CgroupRoot, sock, sock, n.IP(), ClusterDomain, DNSServiceIP)
}

// startKubeProxy starts kube-proxy (iptables mode) in the node's namespaces.
func (n *Node) startKubeProxy() (err error) {
	n.proxy, err = n.startComponent("kube-proxy", "kube-proxy.yaml", kubeProxyConfig(n), nil, "--v=1")
	return err
}

func kubeProxyConfig(n *Node) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: %s
clientConnection: {kubeconfig: %s}
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The conntrack table size and timeouts are the machine's, not the node's: leave them.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, n.Name, n.Kubeconfig, lab.PodCIDR)
}

// stop stops the node's components and everything they started: kubelet and kube-proxy, the
// containers (every process in the node's cgroups), then containerd and its shims (every process
// left in the node's mount namespace).
func (n *Node) stop(ctx context.Context) error {
	_ = n.kubelet.Stop(syscall.SIGTERM, 5*time.Second) // a component that needed SIGKILL is gone all the same
	_ = n.proxy.Stop(syscall.SIGTERM, 5*time.Second)
	var errs []error
	if err := removeCgroups(n.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	_ = n.containerd.Stop(syscall.SIGTERM, 5*time.Second)
	if err := killMountNS(n.MountNS); err != nil {
		errs = append(errs, err)
	}
	if err := unmountNS(ctx, n.MountNS); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
