package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// NodeStatus runs `tabbyctl node status --socket <run dir>/bird.sock` for the node.
func (n *Node) NodeStatus(ctx context.Context) (string, error) {
	return run(ctx, filepath.Join(n.lab.TabbyBin, "tabbyctl"), "node", "status", "--socket", n.BirdSocket())
}

// Tabbyctl runs tabbyctl with the lab's admin kubeconfig.
func (l *Lab) Tabbyctl(ctx context.Context, args ...string) (string, error) {
	return run(ctx, filepath.Join(l.TabbyBin, "tabbyctl"), append([]string{"--kubeconfig", l.Kubecfg}, args...)...)
}

// Diagnostics describe every node (tabby routes, all routes, BGP status, the agent's log tail)
// and the router: what a failed test prints.
func (l *Lab) Diagnostics(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "==== lab %s (state %s, objects from %s)\n", l.ID, l.Dir, l.Chart)
	for _, n := range l.Nodes() {
		fmt.Fprintf(&b, "---- node %s (%s, netns %s, agent running: %v)\n", n.Name, n.Addr, n.NS, n.Running())
		out, err := ip(ctx, "-n", n.NS, "route", "show", "proto", "201")
		fmt.Fprintf(&b, "ip route show proto 201:\n%s%s", out, errSuffix(err))
		out, err = ip(ctx, "-n", n.NS, "route")
		fmt.Fprintf(&b, "ip route:\n%s%s", out, errSuffix(err))
		if n.Addr6.IsValid() {
			out, err = ip(ctx, "-n", n.NS, "-6", "route")
			fmt.Fprintf(&b, "ip -6 route:\n%s%s", out, errSuffix(err))
		}
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			dev := VXLANDevice(f)
			if ok, _ := n.HasLink(ctx, dev); !ok {
				continue
			}
			out, err = ip(ctx, "-n", n.NS, "-d", "addr", "show", "dev", dev)
			fmt.Fprintf(&b, "ip -d addr show dev %s:\n%s%s", dev, out, errSuffix(err))
			out, err = ip(ctx, "-n", n.NS, "neigh", "show", "dev", dev)
			fmt.Fprintf(&b, "ip neigh show dev %s:\n%s%s", dev, out, errSuffix(err))
			out, err = nsExec(ctx, n.NS, "bridge", "fdb", "show", "dev", dev)
			fmt.Fprintf(&b, "bridge fdb show dev %s:\n%s%s", dev, out, errSuffix(err))
		}
		// tabby's rules are in whichever backend felix detected: show both, without the empty one.
		saves := []string{"iptables-legacy-save", "iptables-nft-save"}
		if n.Addr6.IsValid() {
			saves = append(saves, "ip6tables-legacy-save", "ip6tables-nft-save")
		}
		for _, save := range saves {
			out, err = nsExec(ctx, n.NS, save, "-t", "nat")
			if err != nil || strings.Contains(out, "-A ") {
				fmt.Fprintf(&b, "%s -t nat:\n%s%s", save, out, errSuffix(err))
			}
		}
		if !l.Opts.Stub {
			out, err = n.NodeStatus(ctx)
			fmt.Fprintf(&b, "tabbyctl node status:\n%s%s", out, errSuffix(err))
			fmt.Fprintf(&b, "tabby-node log (last 40 lines):\n%s\n", n.LogTail(40))
		}
	}
	for _, t := range l.Typhas {
		fmt.Fprintf(&b, "---- %s (pid %d) log (last 20 lines):\n%s\n", t.Name, t.Pid(), TailFile(t.LogPath, 20))
	}
	if r := l.router; r != nil {
		out, err := ip(ctx, "-n", r.NS, "route")
		fmt.Fprintf(&b, "---- router %s\nip route:\n%s%s", r.NS, out, errSuffix(err))
		if l.Opts.Families.IPv6() {
			out, err = ip(ctx, "-n", r.NS, "-6", "route")
			fmt.Fprintf(&b, "ip -6 route:\n%s%s", out, errSuffix(err))
		}
		if r.kind != "" {
			out, err := r.Status(ctx)
			fmt.Fprintf(&b, "%s status:\n%s%s", r.kind, out, errSuffix(err))
			fmt.Fprintf(&b, "%s log (last 30 lines):\n%s\n", r.kind, TailFile(r.logPath, 30))
		}
	}
	return b.String()
}

func errSuffix(err error) string {
	if err != nil {
		return fmt.Sprintf("(error: %v)\n", err)
	}
	return ""
}
