// Package dataplane wires a pod to the node the way Calico does: a routed veth pair, no bridge.
// The host side (caliXXXX, MAC ee:ee:ee:ee:ee:ee) answers ARP for everything by proxy ARP; the
// pod has its address as a /32 and a default route via 169.254.1.1, a link-local address nobody
// owns, so every packet the pod sends goes to the host, which routes it with <podIP>/32 dev
// caliXXXX.
//
// All link work in the container goes through a netlink socket opened inside its netns, so no
// OS thread ever switches namespace; the veth is created with its peer already in the
// container's netns (one request instead of create + move + rename).
package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/internal/ipfamily"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/internal/nlretry"
)

// Gateways are the pod's next hops, per family. IPv4: never assigned anywhere, answered by the
// host's proxy ARP. IPv6: the host veth's own link-local address, which the kernel derives from
// its MAC ee:ee:ee:ee:ee:ee (EUI-64), so the host answers neighbour discovery for it without
// proxy NDP.
var Gateways = ipfamily.PairOf(netip.MustParseAddr("169.254.1.1"), netip.MustParseAddr("fe80::ecee:eeff:feee:eeee"))

// GatewayFor is the pod's gateway for an address of ip's family.
func GatewayFor(ip netip.Addr) netip.Addr { return Gateways.Get(ipfamily.OfAddr(ip)) }

// HostVethMAC is the MAC of every host-side veth (Calico's): pods see one gateway MAC whichever
// node they run on, and nothing needs the real MAC.
var HostVethMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}

// RouteProtocol is v1.RouteProtocol (201), the rtnetlink protocol of every route tabby programs.
// Repeated here, and held equal by a test, so the CNI binary does not link apis/v1 and the
// Kubernetes machinery behind it: every package in the binary costs time at each exec.
const RouteProtocol = 201

// Errors callers map to distinct CNI error codes.
var (
	ErrNetnsMissing = errors.New("container network namespace not found")
	ErrIfNameTaken  = errors.New("interface name already in use")
)

// Attachment is one pod interface.
type Attachment struct {
	Netns    string // path of the container's netns
	IfName   string // CNI_IFNAME, inside the container
	HostVeth string // caliXXXX, in the host (the plugin's own) netns
	IPs      []netip.Addr
	MTU      int
	// Owner names the attachment (its IPAM handle, network.containerID); ADD records it as the
	// host veth's alias, so that a DEL or GC that cannot enter the netns removes the host veth
	// only when it is still this attachment's (the name is per pod: a newer sandbox of the same
	// pod may own it now).
	Owner string
}

// Links describes the pair made, for the CNI result.
type Links struct {
	HostMAC      net.HardwareAddr
	ContainerMAC net.HardwareAddr
}

// openNetns returns a netlink handle inside the container's netns.
func openNetns(path string) (*netlink.Handle, error) {
	nsh, err := getNetns(path)
	if err != nil {
		return nil, err
	}
	defer nsh.Close()
	return handleAt(path, nsh)
}

func getNetns(path string) (netns.NsHandle, error) {
	if path == "" {
		return 0, fmt.Errorf("%w: CNI_NETNS is empty", ErrNetnsMissing)
	}
	nsh, err := netns.GetFromPath(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("%w: %s", ErrNetnsMissing, path)
		}
		return 0, fmt.Errorf("open netns %s: %w", path, err)
	}
	return nsh, nil
}

func handleAt(path string, nsh netns.NsHandle) (*netlink.Handle, error) {
	h, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket in netns %s: %w", path, err)
	}
	return h, nil
}

// CheckNetns fails with ErrNetnsMissing when the path does not name a netns.
func CheckNetns(path string) error {
	h, err := openNetns(path)
	if err != nil {
		return err
	}
	h.Close()
	return nil
}

// Existing reports the links of an attachment an earlier ADD completed for the same container:
// the container interface is a veth whose peer is the host veth. ok is false when there is no
// such pair (including when something else holds the name).
func Existing(a Attachment) (links Links, ok bool, err error) {
	ch, err := openNetns(a.Netns)
	if err != nil {
		return Links{}, false, err
	}
	defer ch.Close()
	cl, err := ch.LinkByName(a.IfName)
	if err != nil {
		return Links{}, false, nil
	}
	hl, err := netlink.LinkByName(a.HostVeth)
	if err != nil {
		return Links{}, false, nil
	}
	if _, isVeth := cl.(*netlink.Veth); !isVeth || cl.Attrs().ParentIndex != hl.Attrs().Index {
		return Links{}, false, nil
	}
	return Links{HostMAC: hl.Attrs().HardwareAddr, ContainerMAC: cl.Attrs().HardwareAddr}, true, nil
}

// Pair is a veth pair being set up: created by CreatePair, given addresses and routes by
// Configure. ADD creates it while IPAM is still answering.
type Pair struct {
	a         Attachment
	nsh       netns.NsHandle
	ch        *netlink.Handle // netlink inside the container
	host      *netlink.Veth
	container netlink.Link
}

// CreatePair creates the veth pair with its peer directly in the container's netns, applies
// the host-side sysctls and sets both ends up. On failure it removes what it made. The caller
// must Close the Pair (and Delete it if a later step fails).
func CreatePair(a Attachment) (_ *Pair, err error) {
	p := &Pair{a: a}
	if p.nsh, err = getNetns(a.Netns); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.ch, err = handleAt(a.Netns, p.nsh); err != nil {
		return nil, err
	}
	// A host veth with our name is left from an earlier sandbox of the same pod (the name is
	// per pod, not per container) whose DEL never came: it is stale, as in Calico.
	if old, err := netlink.LinkByName(a.HostVeth); err == nil {
		if err := netlink.LinkDel(old); err != nil {
			return nil, fmt.Errorf("delete stale host veth %s: %w", a.HostVeth, err)
		}
	}
	p.host = &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name:         a.HostVeth,
			MTU:          a.MTU,
			HardwareAddr: HostVethMAC,
			Flags:        net.FlagUp,
			TxQLen:       -1,
		},
		PeerName:      a.IfName,
		PeerNamespace: netlink.NsFd(int(p.nsh)),
		PeerTxQLen:    -1,
	}
	if err := netlink.LinkAdd(p.host); err != nil {
		p.host = nil
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("%w: %q in container netns %s (or %q in the host)", ErrIfNameTaken, a.IfName, a.Netns, a.HostVeth)
		}
		return nil, fmt.Errorf("create veth %s/%s: %w", a.HostVeth, a.IfName, err)
	}
	defer func() {
		if err != nil {
			if derr := p.Delete(); derr != nil {
				err = fmt.Errorf("%w (and undo: %v)", err, derr)
			}
		}
	}()
	if a.Owner != "" {
		if err := netlink.LinkSetAlias(p.host, a.Owner); err != nil {
			return nil, fmt.Errorf("record owner %s on %s: %w", a.Owner, a.HostVeth, err)
		}
	}
	if err := hostSysctls(a.HostVeth); err != nil {
		return nil, err
	}
	if p.container, err = p.ch.LinkByName(a.IfName); err != nil {
		return nil, fmt.Errorf("find %s in container netns: %w", a.IfName, err)
	}
	if err := p.ch.LinkSetUp(p.container); err != nil {
		return nil, fmt.Errorf("set %s up in container: %w", a.IfName, err)
	}
	return p, nil
}

// SetMTU changes both ends' MTU (when the pool's encapsulation was learnt after creation).
func (p *Pair) SetMTU(mtu int) error {
	if err := netlink.LinkSetMTU(p.host, mtu); err != nil {
		return fmt.Errorf("set MTU %d on %s: %w", mtu, p.a.HostVeth, err)
	}
	if err := p.ch.LinkSetMTU(p.container, mtu); err != nil {
		return fmt.Errorf("set MTU %d on %s in container: %w", mtu, p.a.IfName, err)
	}
	return nil
}

// Configure gives the container its addresses (/32, /128) and a default route per family, and
// the host its routes to them.
func (p *Pair) Configure(ips []netip.Addr) (Links, error) {
	a, ch, cl := p.a, p.ch, p.container
	if slices.ContainsFunc(ips, netip.Addr.Is6) {
		if err := p.enableIPv6(); err != nil {
			return Links{}, err
		}
	}
	var has4, has6 bool
	for _, ip := range ips {
		addr := &netlink.Addr{IPNet: hostNet(ip)}
		if ip.Is6() {
			// Usable at once: a tentative address could not even answer the host's
			// neighbour solicitation for the first second of the pod's life.
			addr.Flags = unix.IFA_F_NODAD
			has6 = true
		} else {
			has4 = true
		}
		if err := ch.AddrAdd(cl, addr); err != nil {
			return Links{}, fmt.Errorf("add %s to %s in container: %w", addr.IPNet, a.IfName, err)
		}
	}
	if has4 {
		if err := ch.RouteAdd(&netlink.Route{LinkIndex: cl.Attrs().Index, Dst: hostNet(Gateways.Get(ipfamily.IPv4)), Scope: netlink.SCOPE_LINK}); err != nil {
			return Links{}, fmt.Errorf("add route %s dev %s scope link in container: %w", Gateways.Get(ipfamily.IPv4), a.IfName, err)
		}
		if err := ch.RouteAdd(&netlink.Route{LinkIndex: cl.Attrs().Index, Gw: Gateways.Get(ipfamily.IPv4).AsSlice()}); err != nil {
			return Links{}, fmt.Errorf("add default via %s in container: %w", Gateways.Get(ipfamily.IPv4), err)
		}
	}
	if has6 {
		if err := ch.RouteAdd(&netlink.Route{LinkIndex: cl.Attrs().Index, Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, Gw: Gateways.Get(ipfamily.IPv6).AsSlice()}); err != nil {
			return Links{}, fmt.Errorf("add default via %s dev %s in container: %w", Gateways.Get(ipfamily.IPv6), a.IfName, err)
		}
	}
	for _, ip := range ips {
		r := hostRoute(ip, p.host.Index)
		if err := netlink.RouteReplace(r); err != nil {
			return Links{}, fmt.Errorf("add host route %s dev %s: %w", r.Dst, a.HostVeth, err)
		}
	}
	return Links{HostMAC: HostVethMAC, ContainerMAC: cl.Attrs().HardwareAddr}, nil
}

// enableIPv6 turns IPv6 on in the container: runtimes may create a sandbox with IPv6 disabled
// (disable_ipv6=1, as Docker does for a network without IPv6), and then the pod's /128 cannot be
// added at all. Calico does the same for a pod that gets an IPv6 address.
func (p *Pair) enableIPv6() error {
	return inNetns(p.nsh, func() error {
		for _, dev := range []string{"all", "default", p.a.IfName} {
			path := "/proc/sys/net/ipv6/conf/" + dev + "/disable_ipv6"
			if err := os.WriteFile(path, []byte("0"), 0o644); err != nil {
				return fmt.Errorf("enable IPv6 in the container: sysctl %s=0: %w", path, err)
			}
		}
		return nil
	})
}

// Delete removes the pair; deleting one end deletes both, and every route through them.
func (p *Pair) Delete() error {
	if p.host == nil {
		return nil
	}
	if err := netlink.LinkDel(p.host); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete veth %s: %w", p.a.HostVeth, err)
	}
	p.host = nil
	return nil
}

// Close releases the netns handles (the links stay).
func (p *Pair) Close() {
	if p.ch != nil {
		p.ch.Close()
		p.ch = nil
	}
	if p.nsh != 0 {
		p.nsh.Close()
		p.nsh = 0
	}
}

func hostRoute(ip netip.Addr, ifindex int) *netlink.Route {
	return &netlink.Route{
		LinkIndex: ifindex,
		Dst:       hostNet(ip),
		Scope:     netlink.SCOPE_LINK,
		Protocol:  netlink.RouteProtocol(RouteProtocol),
	}
}

// hostSysctls turns the host veth into the pod's router port: answer ARP for any address at
// once (the pod's only neighbour is the fake gateway) and forward what arrives on it.
func hostSysctls(ifname string) error {
	for _, s := range []struct{ path, val string }{
		{"/proc/sys/net/ipv4/conf/" + ifname + "/proxy_arp", "1"},
		{"/proc/sys/net/ipv4/neigh/" + ifname + "/proxy_delay", "0"},
		{"/proc/sys/net/ipv4/conf/" + ifname + "/forwarding", "1"},
	} {
		if err := os.WriteFile(s.path, []byte(s.val), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", filepath.Clean(s.path), s.val, err)
		}
	}
	// The pod's IPv6 gateway is this veth's link-local address: no duplicate address detection,
	// so it answers from the pod's first packet (it only starts once the pod end is up). A host
	// without IPv6 has no such file, and its pods no IPv6.
	dad := "/proc/sys/net/ipv6/conf/" + ifname + "/accept_dad"
	if err := os.WriteFile(dad, []byte("0"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sysctl %s=0: %w", dad, err)
	}
	return nil
}

// Teardown removes the container's interface (and with it the host veth and its routes). A
// netns that is gone, or an interface that is not there, is not an error: DEL must succeed.
// Returns whether the netns still existed.
func Teardown(netnsPath, ifname string) (nsFound bool, err error) {
	ch, err := openNetns(netnsPath)
	if err != nil {
		if errors.Is(err, ErrNetnsMissing) {
			return false, nil
		}
		return false, err
	}
	defer ch.Close()
	l, err := ch.LinkByName(ifname)
	if err != nil {
		if isNotFound(err) {
			return true, nil
		}
		return true, fmt.Errorf("find %s in container netns: %w", ifname, err)
	}
	if err := ch.LinkDel(l); err != nil && !isNotFound(err) {
		return true, fmt.Errorf("delete %s in container netns: %w", ifname, err)
	}
	return true, nil
}

// HostVeth is a host veth as found before a DEL releases its addresses: felix removes a
// released address's route at once, so the route that proves a veth made before owners were
// recorded was this container's must be read before the release.
type HostVeth struct {
	Name   string
	Index  int
	Alias  string
	Routes []netip.Addr // /32 destinations routed to it
}

// FindHostVeth returns the host veth called name; found is false when there is none.
func FindHostVeth(name string) (v HostVeth, found bool, err error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		if isNotFound(err) {
			return HostVeth{}, false, nil
		}
		return HostVeth{}, false, fmt.Errorf("find host veth %s: %w", name, err)
	}
	v = HostVeth{Name: name, Index: l.Attrs().Index, Alias: l.Attrs().Alias}
	if v.Alias != "" {
		return v, true, nil // its owner is recorded: the routes are not needed
	}
	routes, err := nlretry.Dump(func() ([]netlink.Route, error) { return netlink.RouteList(l, netlink.FAMILY_V4) })
	if err != nil {
		return HostVeth{}, false, fmt.Errorf("list routes of %s: %w", name, err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		if dst, ok := netip.AddrFromSlice(r.Dst.IP); ok {
			v.Routes = append(v.Routes, dst.Unmap())
		}
	}
	return v, true, nil
}

// OwnedBy tells whether the veth belongs to the attachment owner, whose released addresses are
// ips: its recorded owner says so, or, for a veth made before owners were recorded, it routed
// one of those addresses.
func (v HostVeth) OwnedBy(owner string, ips []netip.Addr) bool {
	if v.Alias != "" {
		return v.Alias == owner
	}
	for _, r := range v.Routes {
		if slices.Contains(ips, r) {
			return true
		}
	}
	return false
}

// Remove deletes the veth found earlier, unless its name now belongs to another link (a new
// sandbox of the same pod made one in between). Gone already is not an error.
func (v HostVeth) Remove() error {
	l, err := netlink.LinkByIndex(v.Index)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("find host veth %s: %w", v.Name, err)
	}
	if l.Attrs().Name != v.Name || l.Attrs().Alias != v.Alias {
		return nil
	}
	if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete host veth %s: %w", v.Name, err)
	}
	return nil
}

// RemoveOrphanVeths deletes the host veths that ADD recorded as owned by an attachment of
// network that is not in keep (CNI GC: the runtime says those attachments are gone).
func RemoveOrphanVeths(network string, keep map[string]bool) (removed []string, err error) {
	links, err := nlretry.Dump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		alias := l.Attrs().Alias
		if _, isVeth := l.(*netlink.Veth); !isVeth || !strings.HasPrefix(alias, network+".") || keep[alias] {
			continue
		}
		if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
			return removed, fmt.Errorf("delete host veth %s of %s: %w", l.Attrs().Name, alias, err)
		}
		removed = append(removed, l.Attrs().Name)
	}
	return removed, nil
}

func hostNet(ip netip.Addr) *net.IPNet {
	return &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}
}

func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}

// UplinkMTU is the MTU of ifname, or, when ifname is "", of the interface of the default route;
// 1500 when there is no default route (a node whose pods only talk to each other).
func UplinkMTU(ifname string) (int, error) {
	if ifname != "" {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return 0, fmt.Errorf("nodeAddressInterface %q: %w", ifname, err)
		}
		return l.Attrs().MTU, nil
	}
	routes, err := nlretry.Dump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return 0, fmt.Errorf("find default route: %w", err)
	}
	for _, r := range routes {
		if r.LinkIndex == 0 || (r.Dst != nil && !r.Dst.IP.IsUnspecified()) {
			continue
		}
		l, err := netlink.LinkByIndex(r.LinkIndex)
		if err != nil {
			continue
		}
		return l.Attrs().MTU, nil
	}
	return 1500, nil
}

// inNetns runs fn on a thread inside the namespace target (per-namespace /proc/sys files are
// those of the writing thread's namespace). The thread is never returned to the scheduler: it
// ends with its goroutine, so no other code ever runs in the container's namespace by mistake.
func inNetns(target netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // no Unlock: the thread exits with the goroutine
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("enter container netns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
