// Package netnstest runs a test binary inside a private network namespace, so that bird's tests
// can give BGP speakers their own addresses (198.51.100.x on the namespace's loopback), cut
// links with iptables and run ToR routers without touching the host: the namespace, and all it
// holds, dies with the test process.
package netnstest

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const envKey = "TABBY_BIRD_NETNS"

// Main is a TestMain: as root and without -short it re-executes the test binary in a new
// network namespace; otherwise it runs the tests here and Require skips the ones that need it.
func Main(m *testing.M) {
	flag.Parse()
	if os.Getenv(envKey) == "1" {
		if err := setup(); err != nil {
			fmt.Fprintln(os.Stderr, "netnstest:", err)
			os.Exit(2)
		}
		os.Exit(m.Run())
	}
	if testing.Short() || os.Geteuid() != 0 || fuzzing() {
		os.Exit(m.Run())
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), envKey+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "netnstest: re-exec in a network namespace:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// fuzzing tells whether this binary fuzzes (the coordinator or a worker): fuzz targets need no
// namespace, and a re-executed worker would lose the pipes it talks to the coordinator through.
func fuzzing() bool {
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return true
	}
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

// InNamespace tells whether this process runs in the private namespace.
func InNamespace() bool { return os.Getenv(envKey) == "1" }

// Require skips t unless it runs in the private namespace.
func Require(t testing.TB) {
	t.Helper()
	if !InNamespace() {
		t.Skip("needs root and a private network namespace (skipped with -short)")
	}
}

func setup() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

// AddLoopback puts addr (a /32) on the namespace's loopback, until cleanup. It skips t outside
// the private namespace: never an address on the host.
func AddLoopback(t testing.TB, addr netip.Addr) {
	t.Helper()
	Require(t)
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	// An address a test already put on a link (a ToR's shared subnet) is the speaker's as is.
	if have, err := netlink.AddrList(nil, netlink.FAMILY_ALL); err == nil {
		for _, h := range have {
			if h.IP.Equal(addr.AsSlice()) {
				return
			}
		}
	}
	a, _ := netlink.ParseAddr(netip.PrefixFrom(addr, addr.BitLen()).String())
	if addr.Is6() {
		a.Flags = unix.IFA_F_NODAD // usable at once: a tentative address cannot be bound
	}
	if err := netlink.AddrReplace(lo, a); err != nil {
		t.Fatalf("add %s to lo: %v", addr, err)
	}
	t.Cleanup(func() { _ = netlink.AddrDel(lo, a) })
}

// CutLink drops every packet from and to addr, as if its cable were pulled; undone at cleanup.
// It skips t outside the private namespace.
func CutLink(t testing.TB, addr netip.Addr) {
	t.Helper()
	Require(t)
	rules := [][]string{{"INPUT", "-s", addr.String(), "-j", "DROP"}, {"INPUT", "-d", addr.String(), "-j", "DROP"}}
	for _, r := range rules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, r...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v: %s", r, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).Run() })
	}
}
