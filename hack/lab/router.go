package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/internal/proc"
)

// Router is the lab's router namespace: every node's default gateway, "the internet" behind it,
// and optionally a real BGP router (FRR or BIRD2) playing the top-of-rack switch.
type Router struct {
	lab     *Lab
	NS      string
	Subnets []Subnet
	kind    string // "" (plain router), "frr" or "bird": one BGP daemon per router
	dir     string
	logPath string
	procs   []*proc.Proc
	started []daemon // what spawn started, in order, for StartDaemons
}

// daemon is a BGP daemon process the router started.
type daemon struct {
	name string
	argv []string
}

// Endpoint of the router (its address on subnet A).
func (r *Router) Endpoint() Endpoint { return Endpoint{Name: "router", NS: r.NS, IP: RouterA} }

// Endpoint6 is the router at its IPv6 address on subnet A (a lab with IPv6).
func (r *Router) Endpoint6() Endpoint { return Endpoint{Name: "router", NS: r.NS, IP: RouterA6} }

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
	// MaximumPaths is how many equal-cost paths of a prefix the ToR uses (FRR's maximum-paths,
	// in both families); 0 leaves FRR's default.
	MaximumPaths int
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
	writeMaximumPaths(&b, o.MaximumPaths)
	b.WriteString(" exit-address-family\n")
	if r.lab.Opts.Families.IPv6() {
		// MP-BGP: the nodes' IPv6 blocks over the same sessions, with their IPv6 next hops.
		b.WriteString(" address-family ipv6 unicast\n")
		for _, nb := range o.Neighbors {
			fmt.Fprintf(&b, "  neighbor %s activate\n", nb.Addr)
		}
		writeMaximumPaths(&b, o.MaximumPaths)
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

func writeMaximumPaths(b *strings.Builder, n int) {
	if n > 0 {
		fmt.Fprintf(b, "  maximum-paths %d\n", n)
	}
}

// BIRDOptions configure BIRD2 as the ToR.
type BIRDOptions struct {
	ASN       uint32 // the ToR's AS (default DefaultToRASN)
	Neighbors []BGPNeighbor
}

// StartBIRD runs BIRD2 in the router namespace as the ToR: eBGP with every neighbour, IPv4
// unicast and, in a lab with IPv6, IPv6 unicast on the same IPv4 sessions (MP-BGP; an IPv6
// neighbour carries IPv6 alone). It accepts every route and announces none, and installs what it
// learns in the router's kernel, so that the router forwards pod traffic natively. Its log has
// every class: a route BIRD refuses (an unusable next hop, a malformed attribute) is said there
// and nowhere else.
func (r *Router) StartBIRD(ctx context.Context, o BIRDOptions) error {
	if r.kind != "" {
		return fmt.Errorf("router already runs %s", r.kind)
	}
	if _, err := exec.LookPath("bird"); err != nil {
		return fmt.Errorf("BIRD2 is not installed: run `make deps`: %w", err)
	}
	if o.ASN == 0 {
		o.ASN = DefaultToRASN
	}
	r.dir = filepath.Join(r.lab.Dir, "bird")
	r.logPath = filepath.Join(r.dir, "bird.log")
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("BIRD directory: %w", err)
	}
	ipv6 := r.lab.Opts.Families.IPv6()
	var b strings.Builder
	fmt.Fprintf(&b, "log %q all;\nrouter id %s;\nprotocol device { }\n", r.logPath, RouterA)
	b.WriteString("protocol kernel kernel4 { ipv4 { import none; export all; }; }\n")
	if ipv6 {
		b.WriteString("protocol kernel kernel6 { ipv6 { import none; export all; }; }\n")
	}
	for i, nb := range o.Neighbors {
		local, err := r.localAddr(nb.Addr)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "protocol bgp peer%d {\n\tlocal %s as %d;\n\tneighbor %s as %d;\n", i+1, local, o.ASN, nb.Addr, nb.ASN)
		// Sessions come up as soon as the nodes dial, not after BIRD's default connect delay.
		b.WriteString("\tconnect delay time 1;\n\tconnect retry time 1;\n")
		if nb.Password != "" {
			fmt.Fprintf(&b, "\tpassword %q;\n", nb.Password)
		}
		if nb.Addr.Is4() {
			b.WriteString("\tipv4 { import all; export none; };\n")
		}
		if ipv6 || nb.Addr.Is6() {
			b.WriteString("\tipv6 { import all; export none; };\n")
		}
		b.WriteString("}\n")
	}
	conf := filepath.Join(r.dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("BIRD config: %w", err)
	}
	// A config BIRD refuses makes it exit at once, which only its output would tell: check first.
	if _, err := run(ctx, "bird", "-p", "-c", conf); err != nil {
		return fmt.Errorf("BIRD refuses %s:\n%s: %w", conf, b.String(), err)
	}
	r.kind = "bird"
	if err := r.spawn("bird", []string{"bird", "-f", "-c", conf, "-s", r.birdSocket(), "-P", filepath.Join(r.dir, "bird.pid")}); err != nil {
		return err
	}
	return Eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		_, err := r.Status(ctx)
		return err
	})
}

// localAddr is the router's address on the subnet of neighbour a: the address the nodes have
// as the BGPPeer's peerIP.
func (r *Router) localAddr(a netip.Addr) (netip.Addr, error) {
	for _, s := range r.Subnets {
		switch {
		case s.Prefix().Contains(a):
			return s.Gateway(), nil
		case s.Prefix6().Contains(a):
			return s.Gateway6(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("BGP neighbour %s is on none of the router's subnets", a)
}

func (r *Router) birdSocket() string { return filepath.Join(r.dir, "bird.ctl") }

// Birdc runs a BIRD command (`birdc show route all`: Birdc(ctx, "show", "route", "all")).
func (r *Router) Birdc(ctx context.Context, args ...string) (string, error) {
	if r.kind != "bird" {
		return "", fmt.Errorf("the router runs no BIRD")
	}
	return run(ctx, "birdc", append([]string{"-s", r.birdSocket()}, args...)...)
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
	r.started = append(r.started, daemon{name, argv})
	r.lab.onClose(func(context.Context) error {
		_ = p.Stop(syscall.SIGKILL, time.Minute)
		return nil
	})
	return nil
}

// StopDaemons stops the router's BGP daemons with sig (SIGKILL: the ToR crashes) and waits until
// they are gone; StartDaemons starts them again: a ToR restart.
func (r *Router) StopDaemons(sig syscall.Signal) error {
	if r.kind == "" {
		return fmt.Errorf("the router runs no BGP daemon")
	}
	_ = proc.StopAll(r.procs, sig, 10*time.Second)
	r.procs = nil
	// What a killed daemon leaves and a new one must make afresh (bgpd waits for the new
	// zebra's socket).
	for _, f := range []string{"zebra.pid", "bgpd.pid", "bird.pid", "zserv.api"} {
		_ = os.Remove(filepath.Join(r.dir, f))
	}
	return nil
}

// StartDaemons starts the daemons StopDaemons stopped, as they were first started, and returns
// once the BGP daemon answers. Its sessions come back as they reconnect.
func (r *Router) StartDaemons(ctx context.Context) error {
	if len(r.procs) > 0 {
		return fmt.Errorf("the router's BGP daemons run")
	}
	started := r.started
	r.started = nil
	zsock := filepath.Join(r.dir, "zserv.api")
	for _, d := range started {
		if err := r.spawn(d.name, d.argv); err != nil {
			return err
		}
		if d.name == "zebra" {
			if err := Eventually(ctx, 10*time.Second, func(context.Context) error {
				_, err := os.Stat(zsock)
				return err
			}); err != nil {
				return fmt.Errorf("zebra did not create %s: %w", zsock, err)
			}
		}
	}
	return Eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		_, err := r.Status(ctx)
		return err
	})
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
	switch r.kind {
	case "frr":
		return r.Vtysh(ctx, "show bgp summary")
	case "bird":
		return r.Birdc(ctx, "show", "protocols")
	}
	return "", fmt.Errorf("the router runs no BGP daemon")
}

// Log is the log of the router's BGP daemon.
func (r *Router) Log() (string, error) {
	if r.kind == "" {
		return "", fmt.Errorf("the router runs no BGP daemon")
	}
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return "", fmt.Errorf("%s log: %w", r.kind, err)
	}
	return string(b), nil
}

// Routes of the router's kernel table.
func (r *Router) Routes(ctx context.Context) ([]Route, error) { return Routes(ctx, r.NS, 0) }
