// Package cnitest is the harness of the CNI plugin's integration tests and benchmark: the built
// plugin binaries, the reference plugins (containernetworking/plugins v1.9.1, built once and
// cached), a "node" network namespace in which libcni runs the plugins as a runtime would, and
// pod namespaces. Nothing here touches the machine's own namespace.
package cnitest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ReferenceVersion is the containernetworking/plugins release tabby is compared with.
const ReferenceVersion = "v1.9.1"

var reference = map[string]string{
	"ptp":        "github.com/containernetworking/plugins/plugins/main/ptp",
	"host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
	"portmap":    "github.com/containernetworking/plugins/plugins/meta/portmap",
	"bandwidth":  "github.com/containernetworking/plugins/plugins/meta/bandwidth",
}

func cacheDir() string {
	if d := os.Getenv("TABBY_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "tabby")
}

var refMu sync.Mutex

// ReferencePlugins returns a directory holding the named reference plugins, building the ones
// missing with `go install <pkg>@v1.9.1` into $TABBY_CACHE/bin/cni-plugins-v1.9.1.
func ReferencePlugins(names ...string) (string, error) {
	refMu.Lock()
	defer refMu.Unlock()
	dir := filepath.Join(cacheDir(), "bin", "cni-plugins-"+ReferenceVersion)
	for _, n := range names {
		pkg, ok := reference[n]
		if !ok {
			return "", fmt.Errorf("unknown reference plugin %q", n)
		}
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			continue
		}
		cmd := exec.Command("go", "install", pkg+"@"+ReferenceVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOFLAGS=")
		cmd.Dir = os.TempDir() // outside any module: @version installs ignore go.mod anyway
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go install %s@%s: %v\n%s", pkg, ReferenceVersion, err, out)
		}
	}
	return dir, nil
}

// TabbyBinaries returns a directory holding tabby and tabby-ipam: $TABBY_BIN when set (make
// test builds them first), else a fresh `go build` into dir.
func TabbyBinaries(dir string) (string, error) {
	if b := os.Getenv("TABBY_BIN"); b != "" {
		if _, err := os.Stat(filepath.Join(b, "tabby")); err == nil {
			return b, nil
		}
	}
	cmd := exec.Command("go", "build", "-o", dir+"/",
		"github.com/tabbynet/tabby/cmd/tabby", "github.com/tabbynet/tabby/cmd/tabby-ipam")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build tabby plugins: %v\n%s", err, out)
	}
	return dir, nil
}

// NodeAddr is the node namespace's own address (on its uplink): what pods ping to reach "the
// host".
var NodeAddr = net.IPv4(198, 51, 100, 1)

// UplinkName and UplinkMTU describe the node's uplink (1400, as on this machine's real uplink).
const (
	UplinkName = "uplink0"
	UplinkMTU  = 1400
)

// HostNS is a network namespace standing in for a node's root namespace: libcni runs there, so
// the plugins' host-side work (veths, routes, sysctls, iptables) lands in it.
type HostNS struct {
	NS       ns.NetNS
	CNI      *libcni.CNIConfig
	CacheDir string
	// Handle is a netlink socket inside the node namespace, for assertions.
	Handle *netlink.Handle
}

// NewHostNS creates a node namespace with an uplink holding NodeAddr and a default route, and a libcni that finds
// plugins in binDirs and caches results in a private directory.
func NewHostNS(binDirs []string, cacheDir string) (_ *HostNS, err error) {
	n := &HostNS{CacheDir: cacheDir}
	if n.NS, err = testutils.NewNS(); err != nil {
		return nil, fmt.Errorf("create node netns: %w", err)
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	nsh, err := netns.GetFromPath(n.NS.Path())
	if err != nil {
		return nil, err
	}
	defer nsh.Close()
	if n.Handle, err = netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE); err != nil {
		return nil, err
	}
	lo, err := n.Handle.LinkByName("lo")
	if err != nil {
		return nil, err
	}
	if err := n.Handle.LinkSetUp(lo); err != nil {
		return nil, err
	}
	// The node's uplink, with the node address and the default route, as on a real node: the
	// pods' gateway (169.254.1.1) must be routable for proxy ARP to answer for it, and the default
	// pod MTU comes from this interface. Its peer stays in the node: nothing leaves.
	up := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: UplinkName, MTU: UplinkMTU, Flags: net.FlagUp}, PeerName: UplinkName + "p"}
	if err := n.Handle.LinkAdd(up); err != nil {
		return nil, fmt.Errorf("node uplink: %w", err)
	}
	peer, err := n.Handle.LinkByName(UplinkName + "p")
	if err != nil {
		return nil, err
	}
	if err := n.Handle.LinkSetUp(peer); err != nil {
		return nil, err
	}
	if err := n.Handle.AddrAdd(up, &netlink.Addr{IPNet: &net.IPNet{IP: NodeAddr, Mask: net.CIDRMask(24, 32)}}); err != nil {
		return nil, fmt.Errorf("node address: %w", err)
	}
	if err := n.Handle.RouteAdd(&netlink.Route{LinkIndex: up.Index, Gw: net.IPv4(198, 51, 100, 254)}); err != nil {
		return nil, fmt.Errorf("node default route: %w", err)
	}
	n.CNI = libcni.NewCNIConfigWithCacheDir(binDirs, cacheDir, nil)
	return n, nil
}

// Close removes the node namespace (and with it every veth end left in it).
func (n *HostNS) Close() {
	if n.Handle != nil {
		n.Handle.Close()
	}
	if n.NS != nil {
		n.NS.Close()
		_ = testutils.UnmountNS(n.NS)
	}
}

// Do runs f on an OS thread inside the node namespace; processes f starts (the plugins)
// inherit it.
func (n *HostNS) Do(f func() error) error {
	return n.NS.Do(func(ns.NetNS) error { return f() })
}

// Add runs ADD of a conflist for a pod from the node namespace.
func (n *HostNS) Add(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (res any, err error) {
	err = n.Do(func() error {
		r, e := n.CNI.AddNetworkList(ctx, list, rt)
		res = r
		return e
	})
	return res, err
}

// Del runs DEL.
func (n *HostNS) Del(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	return n.Do(func() error { return n.CNI.DelNetworkList(ctx, list, rt) })
}

// Check runs CHECK.
func (n *HostNS) Check(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	return n.Do(func() error { return n.CNI.CheckNetworkList(ctx, list, rt) })
}

// HostVeths lists the cali* links in the node namespace.
func (n *HostNS) HostVeths() ([]string, error) {
	links, err := n.Handle.LinkList()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "cali") {
			out = append(out, l.Attrs().Name)
		}
	}
	return out, nil
}

// TabbyRoutes lists the routes of protocol 201 in the node namespace, both families.
func (n *HostNS) TabbyRoutes() ([]netlink.Route, error) {
	return n.Handle.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: 201}, netlink.RT_FILTER_PROTOCOL)
}

// NewPod creates a pod namespace; remove it with RemovePod.
func NewPod() (ns.NetNS, error) { return testutils.NewNS() }

// RemovePod removes a pod namespace.
func RemovePod(p ns.NetNS) {
	p.Close()
	_ = testutils.UnmountNS(p)
}

// Ping sends one ICMP echo from inside netns path to ip and reports whether a reply came.
func Ping(nsPath string, ip net.IP) error {
	out, err := exec.Command("nsenter", "--net="+nsPath, "ping", "-c", "1", "-W", "2", ip.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s from %s: %v\n%s", ip, nsPath, err, out)
	}
	return nil
}

// Output runs a command (in the calling thread's netns when called inside Node.Do).
func Output(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}
