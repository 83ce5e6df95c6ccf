package plugin_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/names"
)

// unmountHeld removes the pod's netns file while a process still lives in the namespace (as
// when a runtime unmounts it with a process left inside): the namespace, and its veth pair,
// live on until that process ends.
func unmountHeld(t *testing.T, p *pod) {
	t.Helper()
	path := p.ns.Path()
	var want unix.Stat_t
	if err := unix.Stat(path, &want); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("nsenter", "--net="+path, "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	inside := fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got unix.Stat_t
		if unix.Stat(inside, &got) == nil && got.Ino == want.Ino {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder process never entered the pod's namespace")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.ns.Close()
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
		t.Fatalf("unmount %s: %v", path, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) hostVeth(name string) (netlink.Link, bool) {
	l, err := h.node.Handle.LinkByName(name)
	return l, err == nil
}

// dropRoute removes a pod's /32 from its host veth, as felix does as soon as IPAM releases the
// address (tabby-node running): the route can be gone before DEL looks at the veth.
func (h *harness) dropRoute(veth netlink.Link, ip netip.Addr) {
	h.t.Helper()
	err := h.node.Handle.RouteDel(&netlink.Route{LinkIndex: veth.Attrs().Index, Dst: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK})
	if err != nil {
		h.t.Fatalf("drop route %s: %v", ip, err)
	}
}

// TestDelRemovesHostVethOfHeldNetns: DEL with the netns file gone but the namespace alive removes
// the host veth by its recorded owner, even when felix already dropped its route.
func TestDelRemovesHostVethOfHeldNetns(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0")
	p := h.newPod("held")
	ip := h.mustAdd(list, p)
	name := names.HostVethName("default", "held", p.rt.ContainerID)
	veth, ok := h.hostVeth(name)
	if !ok {
		t.Fatalf("host veth %s missing after ADD", name)
	}
	unmountHeld(t, p)
	h.dropRoute(veth, ip)
	if err := h.node.Del(h.ctx, list, p.rt); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if _, ok := h.hostVeth(name); ok {
		t.Fatalf("DEL left host veth %s behind", name)
	}
	h.assertClean("after DEL of a held netns")
}

// TestLateDelSparesNewSandbox: a pod's new sandbox gets the same host veth name; the old
// sandbox's late DEL (its netns file gone, the namespace held) must not remove it, nor its
// address; the new sandbox's DEL removes everything.
func TestLateDelSparesNewSandbox(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0")
	old := h.newPod("same")
	h.mustAdd(list, old)
	unmountHeld(t, old)
	cur := h.newPod("same")
	curIP := h.mustAdd(list, cur)
	name := names.HostVethName("default", "same", cur.rt.ContainerID)
	before, ok := h.hostVeth(name)
	if !ok {
		t.Fatalf("new sandbox's host veth %s missing", name)
	}
	if err := h.node.Del(h.ctx, list, old.rt); err != nil {
		t.Fatalf("late DEL of the old sandbox: %v", err)
	}
	after, ok := h.hostVeth(name)
	if !ok || after.Attrs().Index != before.Attrs().Index {
		t.Fatalf("the old sandbox's DEL removed the new sandbox's host veth %s", name)
	}
	routes, err := h.node.Handle.RouteList(after, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(routes, func(r netlink.Route) bool { return r.Dst != nil && r.Dst.IP.Equal(curIP.AsSlice()) }) {
		t.Fatalf("the old sandbox's DEL removed the new sandbox's route to %s", curIP)
	}
	if hs := h.handles(); len(hs) != 1 || hs[0] != h.network+"."+cur.rt.ContainerID {
		t.Fatalf("handles after the late DEL: %v, want only the new sandbox's", hs)
	}
	if err := h.node.Del(h.ctx, list, cur.rt); err != nil {
		t.Fatal(err)
	}
	h.assertClean("after both DELs")
}

// TestGCRemovesHostVethOfReleasedAttachment: CNI GC releases an attachment the runtime no longer
// lists and removes its host veth, which a held namespace kept; a valid attachment is untouched.
func TestGCRemovesHostVethOfReleasedAttachment(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0")
	kept, gone := h.newPod("gc-kept"), h.newPod("gc-gone")
	h.mustAdd(list, kept)
	h.mustAdd(list, gone)
	keptVeth := names.HostVethName("default", "gc-kept", kept.rt.ContainerID)
	goneVeth := names.HostVethName("default", "gc-gone", gone.rt.ContainerID)
	unmountHeld(t, gone)
	if _, ok := h.hostVeth(goneVeth); !ok {
		t.Fatalf("host veth %s went with the netns file: the namespace is not held", goneVeth)
	}
	// libcni's GC first DELs the attachments it has cached results for; a runtime that lost
	// its cache (a node reboot, a runtime reinstall) leaves the plugin's GC to find the rest.
	cached, _ := filepath.Glob(filepath.Join(h.node.CacheDir, "results", "*"+gone.rt.ContainerID+"*"))
	if len(cached) == 0 {
		t.Fatalf("no libcni cache entry for %s under %s", gone.rt.ContainerID, h.node.CacheDir)
	}
	for _, f := range cached {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	err := h.node.Do(func() error {
		return h.node.CNI.GCNetworkList(h.ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: kept.rt.ContainerID, IfName: "eth0"}}})
	})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if _, ok := h.hostVeth(goneVeth); ok {
		t.Fatalf("GC released %s but left its host veth %s", gone.rt.ContainerID, goneVeth)
	}
	if _, ok := h.hostVeth(keptVeth); !ok {
		t.Fatalf("GC removed the valid attachment's host veth %s", keptVeth)
	}
	if hs := h.handles(); len(hs) != 1 {
		t.Fatalf("handles after GC: %v, want the kept one", hs)
	}
	if err := h.node.Del(h.ctx, list, kept.rt); err != nil {
		t.Fatal(err)
	}
	h.assertClean("after GC and DEL")
}

// TestDelWithNetnsPathOfAnotherNamespace: by DEL time the netns path names another namespace
// (the runtime recreated it) while the old one lives on: DEL finds no interface there, and still
// removes the container's host veth.
func TestDelWithNetnsPathOfAnotherNamespace(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0")
	p := h.newPod("renamed")
	h.mustAdd(list, p)
	name := names.HostVethName("default", "renamed", p.rt.ContainerID)
	unmountHeld(t, p)
	other := h.newPod("elsewhere")
	p.rt.NetNS = other.rt.NetNS
	if err := h.node.Del(h.ctx, list, p.rt); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if _, ok := h.hostVeth(name); ok {
		t.Fatalf("DEL left host veth %s behind", name)
	}
	h.assertClean("after DEL through a netns path that names another namespace")
}
