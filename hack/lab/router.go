package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/internal/proc"
)

// Router is the lab's router namespace: every node's default gateway, "the internet" behind it,
// and optionally a real BGP router (FRR) playing the top-of-rack switch.
type Router struct {
	lab     *Lab
	NS      string
	Subnets []Subnet
	kind    string // "" (plain router) or "frr"
	dir     string
	logPath string
	procs   []*proc.Proc
}

// Endpoint of the router (its address on subnet A).
func (r *Router) Endpoint() Endpoint { return Endpoint{Name: "router", NS: r.NS, IP: RouterA} }

// InternetEndpoint is "the internet" host behind the router.
func (l *Lab) InternetEndpoint() Endpoint {
	return Endpoint{Name: "internet", NS: l.NetnsName("inet"), IP: InternetHost}
}

// InternetEndpoint6 is "the internet" host at its IPv6 address (a lab with IPv6).
func (l *Lab) InternetEndpoint6() Endpoint {
	return Endpoint{Name: "internet", NS: l.NetnsName("inet"), IP: InternetHost6}
}

// BGPNeighbor is a session the ToR accepts.
type BGPNeighbor struct {
	Addr     netip.Addr
	ASN      uint32
	Password string
}

// FRROptions configure the ToR.
type FRROptions struct {
	ASN       uint32 // the ToR's AS (default 65000)
	Neighbors []BGPNeighbor
	// Zebra installs the routes the ToR learns into its kernel (multi-hop: it then forwards pod
	// traffic natively). Without it FRR only learns them.
	Zebra bool
}

// DefaultToRASN is the ToR's AS number.
const DefaultToRASN = 65000

// StartFRR runs FRR's bgpd (and zebra) in the router namespace as user frr, with sockets and
// pid files in a directory owned by frr, and `no bgp ebgp-requires-policy` (else FRR accepts
// nothing over eBGP).
func (r *Router) StartFRR(ctx context.Context, o FRROptions) error {
	if r.kind != "" {
		return fmt.Errorf("router already runs %s", r.kind)
	}
	if o.ASN == 0 {
		o.ASN = DefaultToRASN
	}
	u, err := user.Lookup("frr")
	if err != nil {
		return fmt.Errorf("FRR is not installed (no user frr): run `make deps`: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	r.dir = filepath.Join(r.lab.Dir, "frr")
	r.logPath = filepath.Join(r.dir, "frr.log")
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "frr defaults datacenter\nhostname tor\nlog file %s\n!\nrouter bgp %d\n bgp router-id %s\n no bgp ebgp-requires-policy\n no bgp network import-check\n", r.logPath, o.ASN, RouterA)
	for _, nb := range o.Neighbors {
		fmt.Fprintf(&b, " neighbor %s remote-as %d\n neighbor %s timers connect 1\n", nb.Addr, nb.ASN, nb.Addr)
		if nb.Password != "" {
			fmt.Fprintf(&b, " neighbor %s password %s\n", nb.Addr, nb.Password)
		}
	}
	b.WriteString(" address-family ipv4 unicast\n")
	for _, nb := range o.Neighbors {
		fmt.Fprintf(&b, "  neighbor %s activate\n", nb.Addr)
	}
	b.WriteString(" exit-address-family\n")
	if r.lab.Opts.Families.IPv6() {
		// MP-BGP: the nodes' IPv6 blocks over the same sessions, with their IPv6 next hops.
		b.WriteString(" address-family ipv6 unicast\n")
		for _, nb := range o.Neighbors {
			fmt.Fprintf(&b, "  neighbor %s activate\n", nb.Addr)
		}
		b.WriteString(" exit-address-family\n")
	}
	b.WriteString("!\n")
	files := map[string]string{"bgpd.conf": b.String(), "zebra.conf": "hostname tor-zebra\nlog file " + r.logPath + "\n", "vtysh.conf": ""}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o640); err != nil {
			return err
		}
	}
	for _, p := range []string{r.dir, filepath.Join(r.dir, "bgpd.conf"), filepath.Join(r.dir, "zebra.conf"), filepath.Join(r.dir, "vtysh.conf")} {
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
	}
	if err := touchOwned(r.logPath, uid, gid); err != nil {
		return err
	}
	zsock := filepath.Join(r.dir, "zserv.api")
	common := []string{"-u", "frr", "-g", "frr", "-z", zsock, "--vty_socket", r.dir, "-P", "0"}
	r.kind = "frr"
	if o.Zebra {
		if err := r.spawn("zebra", append([]string{"/usr/lib/frr/zebra", "-f", filepath.Join(r.dir, "zebra.conf"), "-i", filepath.Join(r.dir, "zebra.pid")}, common...)); err != nil {
			return err
		}
		// bgpd connects to zebra's socket; give zebra the moment it needs to create it.
		if err := Eventually(ctx, 10*time.Second, func(context.Context) error {
			_, err := os.Stat(zsock)
			return err
		}); err != nil {
			return fmt.Errorf("zebra did not create %s: %w; log:\n%s", zsock, err, TailFile(r.logPath, 20))
		}
	}
	args := append([]string{"/usr/lib/frr/bgpd", "-f", filepath.Join(r.dir, "bgpd.conf"), "-i", filepath.Join(r.dir, "bgpd.pid")}, common...)
	if !o.Zebra {
		args = append(args, "-Z", "-n")
	}
	if err := r.spawn("bgpd", args); err != nil {
		return err
	}
	return Eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		_, err := r.Status(ctx)
		return err
	})
}

func touchOwned(path string, uid, gid int) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	f.Close()
	return os.Chown(path, uid, gid)
}

func (r *Router) spawn(name string, argv []string) error {
	p, err := proc.Start(name, append([]string{"ip", "netns", "exec", r.NS}, argv...), proc.Options{Log: filepath.Join(r.dir, name+".out")})
	if err != nil {
		return fmt.Errorf("router %s: %w", r.NS, err)
	}
	r.procs = append(r.procs, p)
	r.lab.onClose(func(context.Context) error {
		_ = p.Stop(syscall.SIGKILL, time.Minute)
		return nil
	})
	return nil
}

// Vtysh runs an FRR command.
func (r *Router) Vtysh(ctx context.Context, command string) (string, error) {
	if r.kind != "frr" {
		return "", fmt.Errorf("the router runs no FRR")
	}
	return run(ctx, "vtysh", "--vty_socket", r.dir, "-c", command)
}

// Status is the BGP summary of the router's BGP daemon.
func (r *Router) Status(ctx context.Context) (string, error) {
	return r.Vtysh(ctx, "show bgp summary")
}

// Routes of the router's kernel table.
func (r *Router) Routes(ctx context.Context) ([]Route, error) { return Routes(ctx, r.NS, 0) }
