package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// helmSet are the chart values of the lab's options: its families' pools, their vxlanMode and
// BGP. Options.HelmSet comes after them and wins.
func (o Options) helmSet() []string {
	set := o.Families.helmSet()
	if o.VXLAN != "" {
		set = append(set, "ipPool.vxlanMode="+string(o.VXLAN), "ipv6Pool.vxlanMode="+string(o.VXLAN))
	}
	if o.NoBGP {
		set = append(set, "bgp.enabled=false")
	}
	return set
}

// VXLANDevice is the name of tabby's VXLAN device of the family: vxlan.tabby, vxlan-v6.tabby.
func VXLANDevice(f ipfamily.Family) string { return calc.VXLANDevice(f) }

// NodeModel is the node's Node object as tabby reads it (its VTEPs and MACs, its underlay
// addresses), parsed by the product's own parser.
func (l *Lab) NodeModel(ctx context.Context, name string) (model.Node, error) {
	obj, err := l.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return model.Node{}, fmt.Errorf("get Node %s: %w", name, err)
	}
	n, errs := validation.ParseNode(obj)
	if len(errs) > 0 {
		return model.Node{}, fmt.Errorf("Node %s: %v", name, errs.ToAggregate())
	}
	return n, nil
}

// VXLANEntries are the permanent entries on one of a node's VXLAN devices: the neighbours
// (remote VTEP address → its MAC) and the FDB (remote MAC → the node's underlay address).
type VXLANEntries struct {
	Neigh map[netip.Addr]string
	FDB   map[string]netip.Addr
}

// VXLANEntries reads the permanent neighbour and FDB entries of the node's VXLAN device of the
// family; both are empty when the device does not exist.
func (n *Node) VXLANEntries(ctx context.Context, f ipfamily.Family) (VXLANEntries, error) {
	e := VXLANEntries{Neigh: map[netip.Addr]string{}, FDB: map[string]netip.Addr{}}
	dev := VXLANDevice(f)
	if ok, err := n.HasLink(ctx, dev); err != nil || !ok {
		return e, err
	}
	out, err := ip(ctx, "-n", n.NS, "-j", "neigh", "show", "dev", dev, "nud", "permanent")
	if err != nil {
		return e, err
	}
	var neigh []struct {
		Dst    string `json:"dst"`
		LLAddr string `json:"lladdr"`
	}
	if err := decodeJSON(out, &neigh); err != nil {
		return e, fmt.Errorf("node %s: neighbours of %s: %w", n.Name, dev, err)
	}
	for _, x := range neigh {
		a, err := netip.ParseAddr(x.Dst)
		if err != nil {
			return e, fmt.Errorf("node %s: neighbour %q of %s: %w", n.Name, x.Dst, dev, err)
		}
		e.Neigh[a] = x.LLAddr
	}
	out, err = nsExec(ctx, n.NS, "bridge", "-j", "fdb", "show", "dev", dev)
	if err != nil {
		return e, err
	}
	var fdb []struct {
		MAC   string `json:"mac"`
		Dst   string `json:"dst"`
		State string `json:"state"`
	}
	if err := decodeJSON(out, &fdb); err != nil {
		return e, fmt.Errorf("node %s: FDB of %s: %w", n.Name, dev, err)
	}
	for _, x := range fdb {
		// The device's own and multicast entries have no remote destination.
		if x.Dst == "" {
			continue
		}
		a, err := netip.ParseAddr(x.Dst)
		if err != nil {
			return e, fmt.Errorf("node %s: FDB entry %s dst %q of %s: %w", n.Name, x.MAC, x.Dst, dev, err)
		}
		e.FDB[x.MAC] = a
	}
	return e, nil
}

// HasLink tells whether the node's namespace has a link of that name.
func (n *Node) HasLink(ctx context.Context, dev string) (bool, error) {
	out, err := ip(ctx, "-n", n.NS, "-j", "link", "show")
	if err != nil {
		return false, err
	}
	var links []struct {
		Name string `json:"ifname"`
	}
	if err := decodeJSON(out, &links); err != nil {
		return false, fmt.Errorf("node %s: links: %w", n.Name, err)
	}
	for _, l := range links {
		if l.Name == dev {
			return true, nil
		}
	}
	return false, nil
}

// LinkInfo is what a test reads of a link: its MTU, MAC, global addresses and packet counters.
type LinkInfo struct {
	MTU       int
	MAC       string
	Addrs     []netip.Addr
	TxPackets uint64
	RxPackets uint64
}

// Link reads a link inside a namespace.
func Link(ctx context.Context, netns, dev string) (LinkInfo, error) {
	out, err := ip(ctx, "-n", netns, "-s", "-j", "addr", "show", "dev", dev)
	if err != nil {
		return LinkInfo{}, err
	}
	var links []struct {
		MTU   int    `json:"mtu"`
		MAC   string `json:"address"`
		Addrs []struct {
			Local string `json:"local"`
			Scope string `json:"scope"`
		} `json:"addr_info"`
		Stats struct {
			Rx struct {
				Packets uint64 `json:"packets"`
			} `json:"rx"`
			Tx struct {
				Packets uint64 `json:"packets"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := decodeJSON(out, &links); err != nil || len(links) != 1 {
		return LinkInfo{}, fmt.Errorf("link %s in %s: %q: %v", dev, netns, out, err)
	}
	l := links[0]
	li := LinkInfo{MTU: l.MTU, MAC: l.MAC, TxPackets: l.Stats.Tx.Packets, RxPackets: l.Stats.Rx.Packets}
	for _, a := range l.Addrs {
		if a.Scope != "global" {
			continue
		}
		addr, err := netip.ParseAddr(a.Local)
		if err != nil {
			return LinkInfo{}, fmt.Errorf("link %s in %s: address %q: %w", dev, netns, a.Local, err)
		}
		li.Addrs = append(li.Addrs, addr)
	}
	return li, nil
}

func decodeJSON(out string, v any) error {
	if strings.TrimSpace(out) == "" {
		return nil
	}
	return json.Unmarshal([]byte(out), v)
}

// poolModes maps each pool's CIDR to its vxlanMode (Never when unset).
func (l *Lab) poolModes(ctx context.Context) (map[netip.Prefix]v1.VXLANMode, error) {
	pools, err := l.Client.IPPools().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list IPPools: %w", err)
	}
	out := map[netip.Prefix]v1.VXLANMode{}
	for _, p := range pools.Items {
		cidr, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil {
			return nil, fmt.Errorf("IPPool %s: %w", p.Name, err)
		}
		mode := p.Spec.VXLANMode
		if mode == "" {
			mode = v1.VXLANModeNever
		}
		out[cidr] = mode
	}
	return out, nil
}

// blockRoute is the route node n must hold to block b of node other, a lab node: natively via
// the other node's address on eth0, or, in a VXLAN pool (Always, or CrossSubnet to another
// subnet), via the other node's VTEP on the family's VXLAN device; "" when there is none: a
// native block where either node runs without BGP, so that nothing carries it.
func blockRoute(b netip.Prefix, n, other *Node, modes map[netip.Prefix]v1.VXLANMode, vtep func(string, ipfamily.Family) (netip.Addr, error)) (string, error) {
	f := ipfamily.OfPrefix(b)
	mode := v1.VXLANModeNever
	for cidr, m := range modes {
		if cidr.Overlaps(b) {
			mode = m
		}
	}
	if mode == v1.VXLANModeAlways || mode == v1.VXLANModeCrossSubnet && other.Subnet != n.Subnet {
		gw, err := vtep(other.Name, f)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s via %s dev %s", b, gw, VXLANDevice(f)), nil
	}
	if mode == v1.VXLANModeNever && (n.NoBGP() || other.NoBGP()) {
		return "", nil
	}
	if f == ipfamily.IPv6 {
		return fmt.Sprintf("%s via %s dev eth0", b, other.IP6()), nil
	}
	return fmt.Sprintf("%s via %s dev eth0", b, other.IP()), nil
}

// ForwardCounter counts the packets the router forwards that match a rule of its own: an
// ACCEPT at the head of FORWARD (whose policy accepts anyway), read back by its comment.
type ForwardCounter struct {
	r       *Router
	cmd     string
	comment string
}

// CountForwarded starts counting the family's forwarded packets that match (iptables match
// arguments, e.g. "-p", "udp", "--dport", "4789").
func (r *Router) CountForwarded(ctx context.Context, f ipfamily.Family, name string, match ...string) (*ForwardCounter, error) {
	c := &ForwardCounter{r: r, cmd: f.IPTablesCommand(), comment: "lab-" + name}
	args := append([]string{c.cmd, "-w", "-I", "FORWARD"}, match...)
	args = append(args, "-m", "comment", "--comment", c.comment, "-j", "ACCEPT")
	if _, err := nsExec(ctx, r.NS, args...); err != nil {
		return nil, fmt.Errorf("router: count %s: %w", name, err)
	}
	return c, nil
}

// Packets is how many packets matched so far.
func (c *ForwardCounter) Packets(ctx context.Context) (uint64, error) {
	out, err := nsExec(ctx, c.r.NS, c.cmd, "-w", "-L", "FORWARD", "-v", "-x", "-n")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "/* "+c.comment+" */") {
			continue
		}
		var n uint64
		if _, err := fmt.Sscan(line, &n); err != nil {
			return 0, fmt.Errorf("router: counter %s in %q: %w", c.comment, line, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("router: no rule %s in FORWARD:\n%s", c.comment, out)
}
