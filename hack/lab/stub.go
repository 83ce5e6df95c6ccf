package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
)

// The stub stands in for tabby while it is not built: the reference ptp + host-local plugins
// give each node a /24 of the pod range, and the lab itself writes the routes between nodes
// that tabby's BGP would. It proves the lab (namespaces, libcni, the ping matrix), not tabby.

func (l *Lab) stubBlock(n *Node) netip.Prefix {
	last := n.IP().As4()[3]
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, last, 0}), 24)
}

func (l *Lab) stubConflist(n *Node) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "lab-stub",
		"plugins": []any{map[string]any{
			"type": "ptp",
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": l.stubBlock(n).String()}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": filepath.Join(n.Dir, "host-local"),
			},
		}},
	}
	return json.Marshal(conf)
}

func (l *Lab) stubNodeAdded(ctx context.Context, n *Node) error {
	if err := sysctl(n.NS, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	return l.stubResync(ctx)
}

// stubResync makes every node route every other node's /24 via that node.
func (l *Lab) stubResync(ctx context.Context) error {
	l.stubMu.Lock()
	defer l.stubMu.Unlock()
	nodes := l.Nodes() // inside the lock: the last resync sees every node
	for _, n := range nodes {
		out, err := ip(ctx, "-n", n.NS, "route", "flush", "proto", "static")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		for _, o := range nodes {
			if o == n {
				continue
			}
			if o.Subnet != n.Subnet {
				return fmt.Errorf("the stub routes within one subnet only (%s and %s)", n.Name, o.Name)
			}
			if _, err := ip(ctx, "-n", n.NS, "route", "replace", l.stubBlock(o).String(), "via", o.IP().String(), "proto", "static"); err != nil {
				return err
			}
		}
	}
	return nil
}
