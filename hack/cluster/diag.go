package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// Diagnostics is what to look at when something failed: pods and nodes as the API server sees
// them, recent events, and the end of every component's log.
func (c *Cluster) Diagnostics(ctx context.Context) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "nodes", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		// tabby's own agents: what they did, and whom they watched through.
		{"logs", "-n", lab.Namespace, "-l", "app.kubernetes.io/component=tabby-node", "--tail=40", "--prefix"},
		{"logs", "-n", lab.Namespace, "-l", "app.kubernetes.io/component=tabby-typha", "--tail=15", "--prefix"},
	} {
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := c.Kubectl(kctx, args...)
		cancel()
		fmt.Fprintf(&b, "---- kubectl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	for _, p := range c.controllers {
		fmt.Fprintf(&b, "---- %s log (last 15 lines)\n%s\n", p.Name, lab.TailFile(p.Log, 15))
	}
	for _, n := range c.Nodes {
		for _, name := range []string{"containerd", "kubelet", "kube-proxy"} {
			fmt.Fprintf(&b, "---- %s %s log (last 25 lines)\n%s\n", n.Name, name, lab.TailFile(filepath.Join(n.Root, name+".log"), 25))
		}
	}
	return b.String()
}
