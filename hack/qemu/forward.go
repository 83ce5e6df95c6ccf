package qemu

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// GuestForwardIP is where the guest reaches forwarded host ports (qemu user networking's
// guestfwd address), from the guest's root network namespace.
const GuestForwardIP = "10.0.2.100"

// Forward makes HostAddr (e.g. a kube-apiserver on 127.0.0.1:6443) reachable from the guest at
// GuestForwardIP:GuestPort. The guest's network card carries nothing else: qemu's user network
// runs with restrict=on, so the guest cannot reach any other host or network.
type Forward struct {
	GuestPort int
	HostAddr  string
}

// relayEnv makes a process started from a binary that imports this package act as a relay
// (stdin/stdout <-> TCP), which qemu's guestfwd runs once per guest connection. Re-executing the
// caller's own binary needs no socat or nc on the host.
const relayEnv = "TABBY_QEMU_RELAY"

func init() {
	if addr := os.Getenv(relayEnv); addr != "" {
		os.Exit(relay(addr, os.Stdin, os.Stdout))
	}
}

// relayHalfCloseWait bounds how long a relay waits for the host side once the guest has closed
// its side: a watch the server never ends must not keep the relay alive after qemu is gone.
const relayHalfCloseWait = 10 * time.Second

func relay(addr string, in io.Reader, out io.Writer) int {
	closeInheritedSockets()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tabby-qemu relay: %v\n", err)
		return 1
	}
	defer conn.Close()
	// When the host side ends the relay exits, which closes the guest's connection; when the
	// guest side ends first, the host gets a half-close and a bounded time to answer.
	hostDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, conn)
		close(hostDone)
	}()
	guestDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, in)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(guestDone)
	}()
	select {
	case <-hostDone:
	case <-guestDone:
		select {
		case <-hostDone:
		case <-time.After(relayHalfCloseWait):
		}
	}
	return 0
}

func (f Forward) validate() error {
	if f.GuestPort <= 0 || f.GuestPort > 65535 {
		return fmt.Errorf("qemu options: Forward GuestPort %d is not a TCP port", f.GuestPort)
	}
	if _, _, err := net.SplitHostPort(f.HostAddr); err != nil {
		return fmt.Errorf("qemu options: Forward HostAddr %q: %w", f.HostAddr, err)
	}
	return nil
}

// netdevArgs gives qemu a virtio NIC on a restricted user network whose only reachable
// addresses are the forwards.
func netdevArgs(fwds []Forward) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the guestfwd relay: %w", err)
	}
	if strings.ContainsAny(exe, " '\"\\") {
		return nil, fmt.Errorf("own executable %q: a path with spaces or quotes cannot be a guestfwd command", exe)
	}
	nd := "user,id=n0,restrict=on"
	for _, f := range fwds {
		cmd := fmt.Sprintf("env %s=%s %s", relayEnv, f.HostAddr, exe)
		// qemu option values escape a comma by doubling it.
		nd += fmt.Sprintf(",guestfwd=tcp:%s:%d-cmd:%s", GuestForwardIP, f.GuestPort, strings.ReplaceAll(cmd, ",", ",,"))
	}
	// romfile= skips loading iPXE, which only slows the boot.
	return []string{"-netdev", nd, "-device", "virtio-net-pci,netdev=n0,romfile="}, nil
}

// closeInheritedSockets closes the sockets a relay inherits besides its stdin and stdout: qemu
// forks every relay while it holds the other guest connections' socket pairs, so a relay that
// kept them would hold those connections open after their own relays end, and the guest would
// never see them close.
func closeInheritedSockets() {
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, de := range des {
		fd, err := strconv.Atoi(de.Name())
		if err != nil || fd <= 2 {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + de.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			_ = syscall.Close(fd)
		}
	}
}
