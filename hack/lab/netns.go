package lab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// netnsDir is where `ip netns` keeps its named namespaces.
const netnsDir = "/var/run/netns"

// NetnsPath is the bind-mount path of a named network namespace.
func NetnsPath(name string) string { return filepath.Join(netnsDir, name) }

// inNetns runs fn on an OS thread switched into the named namespace. ns.Do locks the thread and
// switches back afterwards (a thread that cannot switch back is discarded), so no other
// goroutine ever runs in the wrong namespace. Sockets created inside fn stay in that namespace
// and may be used from any goroutine afterwards; processes forked inside fn start in it.
func inNetns(name string, fn func() error) error {
	h, err := ns.GetNS(NetnsPath(name))
	if err != nil {
		return fmt.Errorf("open netns %s: %w", name, err)
	}
	defer h.Close()
	return h.Do(func(ns.NetNS) error { return fn() })
}

// InNetns runs fn with its OS thread in the named namespace (see inNetns): sockets made in fn
// belong to the namespace, for a caller's own probes.
func InNetns(name string, fn func() error) error { return inNetns(name, fn) }

// run runs a command and returns its combined output; the error quotes the command and output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// ip runs iproute2.
func ip(ctx context.Context, args ...string) (string, error) { return run(ctx, "ip", args...) }

// nsExec runs a command inside a named namespace.
func nsExec(ctx context.Context, netns string, args ...string) (string, error) {
	return run(ctx, "ip", append([]string{"netns", "exec", netns}, args...)...)
}

// sysctl sets a sysctl inside a namespace by writing /proc/sys from a thread in it (no process
// per setting; /proc/sys/net reflects the writing thread's namespace).
func sysctl(netns string, kv ...string) error {
	return inNetns(netns, func() error {
		for i := 0; i+1 < len(kv); i += 2 {
			p := "/proc/sys/" + strings.ReplaceAll(kv[i], ".", "/")
			if err := os.WriteFile(p, []byte(kv[i+1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s in %s: %w", kv[i], kv[i+1], netns, err)
			}
		}
		return nil
	})
}

// addNetns creates a named namespace with loopback up.
func addNetns(ctx context.Context, name string) error {
	if _, err := ip(ctx, "netns", "add", name); err != nil {
		return err
	}
	_, err := ip(ctx, "-n", name, "link", "set", "lo", "up")
	return err
}

// delNetns kills every process left in a namespace and removes it.
func delNetns(ctx context.Context, name string) error {
	if out, err := ip(ctx, "netns", "pids", name); err == nil {
		for _, f := range strings.Fields(out) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	}
	if _, err := os.Stat(NetnsPath(name)); os.IsNotExist(err) {
		return nil
	}
	_, err := ip(ctx, "netns", "del", name)
	return err
}

// listNetns lists the named namespaces.
func listNetns() ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

// dialIn opens a TCP connection from inside a namespace.
func dialIn(ctx context.Context, netns, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(netns, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}
