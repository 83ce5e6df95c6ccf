// Package app is the lab command's logic (the main only parses flags).
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/internal/testenv"
	observeclient "github.com/tabbynet/tabby/observe/client"
	"github.com/tabbynet/tabby/ui"
)

// DemoOptions size the demo.
type DemoOptions struct {
	Nodes, PodsPerNode int
	Stub               bool
	// Families: lab.DualStack or lab.IPv6Only give pods IPv6 addresses.
	Families lab.Families
	// Typha: tabby-typha replicas the nodes watch through (0: none).
	Typha int
	// VXLAN: the pools' vxlanMode, with BGP off on every node ("": routed natively over BGP).
	VXLAN v1.VXLANMode
	// UI is where the demo serves the web view (tabbyctl ui's page) while it runs; another
	// free port of 127.0.0.1 when that one is taken, none when empty.
	UI string
}

// ParseEncap reads the demo's --encap: none, or vxlan (the pools' vxlanMode Always).
func ParseEncap(s string) (v1.VXLANMode, error) {
	switch s {
	case "", "none":
		return "", nil
	case "vxlan":
		return v1.VXLANModeAlways, nil
	}
	return "", fmt.Errorf("encapsulation %q: want none or vxlan", s)
}

// Demo runs the README's first command: a mesh of nodes with pods, tabby's view of one node, a
// ping matrix, then waits (Ctrl-C) while the user looks around. Everything is removed on exit.
func Demo(ctx context.Context, w io.Writer, o DemoOptions) (err error) {
	start := time.Now()
	how := "BGP between the nodes"
	if o.VXLAN != "" {
		how = "VXLAN between the nodes, no BGP"
	}
	fmt.Fprintf(w, "starting a %d-node tabby lab, %s, %s (control plane, namespaces, tabby-node)...\n", o.Nodes, familiesName(o.Families), how)
	l, err := lab.New(ctx, lab.Options{Stub: o.Stub, Families: o.Families, Typha: o.Typha, VXLAN: o.VXLAN, NoBGP: o.VXLAN != "", FlowLogs: !o.Stub})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(w, "\ntearing the lab down...")
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if cerr := l.Close(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", cerr))
		} else {
			fmt.Fprintln(w, "removed everything.")
		}
	}()
	fail := func(err error) error {
		fmt.Fprintln(w, l.Diagnostics(context.Background()))
		return err
	}
	var specs []lab.NodeSpec
	for i := 1; i <= o.Nodes; i++ {
		specs = append(specs, lab.NodeSpec{Name: fmt.Sprintf("node-%d", i)})
	}
	nodes, err := l.AddNodes(ctx, specs...)
	if err != nil {
		return fail(err)
	}
	var pods []lab.PodSpec
	for i := 1; i <= o.Nodes; i++ {
		for j := 1; j <= o.PodsPerNode; j++ {
			name := fmt.Sprintf("pod-%d-%d", i, j)
			pods = append(pods, lab.PodSpec{Name: name, Node: fmt.Sprintf("node-%d", i), Labels: map[string]string{"app": "tabby-lab", podLabel: name}})
		}
	}
	if _, err := l.AddPods(ctx, pods...); err != nil {
		return fail(err)
	}
	// One matrix per family: a dual-stack pod must answer at both of its addresses.
	var matrices []*lab.Matrix
	var titles []string
	if o.Families.IPv4Pods() {
		matrices, titles = append(matrices, pingAll(ctx, l.PodEndpoints())), append(titles, "IPv4")
	}
	if o.Families.IPv6() {
		matrices, titles = append(matrices, pingAll(ctx, l.PodEndpoints6())), append(titles, "IPv6")
	}
	first := nodes[0]
	fmt.Fprintf(w, "\nlab %s up in %s; cluster objects from %s\n", l.ID, time.Since(start).Round(100*time.Millisecond), l.Chart)
	if !o.Stub {
		status, err := first.NodeStatus(ctx)
		if err != nil {
			status += err.Error()
		}
		fmt.Fprintf(w, "\n$ tabbyctl node status --socket %s   (on %s)\n%s", first.BirdSocket(), first.Name, status)
		routes, err := first.TabbyRoutes(ctx)
		if err != nil {
			return fail(err)
		}
		if o.Families.IPv4Pods() {
			fmt.Fprintf(w, "\n$ ip netns exec %s ip route show proto 201   (tabby's routes on %s)\n", first.NS, first.Name)
			for _, r := range lab.RouteStrings(routes) {
				fmt.Fprintln(w, r)
			}
		}
		if o.Families.IPv6() {
			routes, err := first.TabbyRoutes6(ctx)
			if err != nil {
				return fail(err)
			}
			fmt.Fprintf(w, "\n$ ip netns exec %s ip -6 route show proto 201   (tabby's IPv6 routes on %s)\n", first.NS, first.Name)
			for _, r := range lab.RouteStrings(routes) {
				fmt.Fprintln(w, r)
			}
		}
	}
	if o.VXLAN != "" && !o.Stub {
		out, err := l.Tabbyctl(ctx, "node", "dataplane", "--node", first.Name)
		if err != nil {
			out += err.Error()
		}
		fmt.Fprintf(w, "\n$ tabbyctl node dataplane --node %s   (the VXLAN peers %s programs)\n%s", first.Name, first.Name, out)
	}
	for _, t := range l.Typhas {
		fmt.Fprintf(w, "\n%s serves the nodes' watches: curl -s http://%s/metrics | grep tabby_typha_watches\n", t.Name, t.Metrics)
	}
	for i, m := range matrices {
		fmt.Fprintf(w, "\npod-to-pod ping matrix, %s:\n%s", titles[i], m)
		if f := m.Failures(); len(f) > 0 {
			return fail(fmt.Errorf("%s: %d pairs do not reach each other: %v", titles[i], len(f), f))
		}
	}
	if o.UI != "" && !o.Stub {
		uiCtx, stopUI := context.WithCancel(ctx)
		served, err := serveUI(uiCtx, w, l, o.UI)
		if err != nil {
			stopUI()
			return fail(err)
		}
		// The page goes before the lab it shows.
		defer func() {
			stopUI()
			err = errors.Join(err, <-served)
		}()
		if err := startDenied(uiCtx, w, l, l.Pods()); err != nil {
			return fail(err)
		}
	}
	fmt.Fprint(w, lookAround(o, l.ID, l.Kubecfg, testenv.Kubectl(), first, l.Pods()))
	<-ctx.Done()
	return nil
}

// serveUI serves the web view of l at addr, or at another port of 127.0.0.1 if addr is taken,
// and prints its address; Serve's end comes on the channel once ctx is done.
func serveUI(ctx context.Context, w io.Writer, l *lab.Lab, addr string) (<-chan error, error) {
	b, err := observeclient.New(ctx, l.Config, observeclient.Options{CAFile: l.ObserveCA()})
	if err != nil {
		return nil, fmt.Errorf("web view: %w", err)
	}
	ln, err := ui.Listen(addr)
	if err != nil {
		fmt.Fprintf(w, "\n%v; the web view takes another port\n", err)
		if ln, err = ui.Listen("127.0.0.1:0"); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(w, "\nthe web view, live flows and the BGP mesh (what bin/tabbyctl ui serves): %s\n", ui.URL(ln))
	served := make(chan error, 1)
	go func() { served <- ui.Serve(ctx, ln, b, ui.Options{Logger: slog.Default()}) }()
	return served, nil
}

// lookAround is what the demo suggests running while the lab is up: commands to copy, each with
// what it shows, for the families the pods have.
func lookAround(o DemoOptions, id, kubeconfig, kubectl string, first *lab.Node, pods []*lab.Pod) string {
	p, last := pods[0], pods[len(pods)-1]
	var b strings.Builder
	fmt.Fprintf(&b, `
all green. Look around (in another shell, as root):
  ip netns exec %s sh                      # a shell in pod %s (%s)
  ip netns exec %s ip route                # node %s's routes
  ip netns exec %s traceroute -n %s   # real hops: node, node, pod
`, p.NS, p.Name, podAddrs(p), first.NS, first.Name, p.NS, last.IP)
	if o.Families == lab.DualStack {
		fmt.Fprintf(&b, "  ip netns exec %s traceroute -n %s   # the same over IPv6\n", p.NS, last.IP6)
	}
	fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", kubeconfig)
	fmt.Fprintln(&b, "  bin/tabbyctl get ippool -o wide")
	fmt.Fprintln(&b, "  bin/tabbyctl get node                    # each node's BGP addresses and AS number")
	fmt.Fprintln(&b, "  bin/tabbyctl ipam show --show-blocks     # pools and the blocks each node holds")
	fmt.Fprintf(&b, "  bin/tabbyctl node status --socket %s\n", first.BirdSocket())
	if !o.Stub {
		fmt.Fprintf(&b, "  bin/tabbyctl policy check --node %s --netns %s   # %s's policy chains and sets against the API\n", first.Name, first.NS, first.Name)
		fmt.Fprintln(&b, "  bin/tabbyctl flows --verdict deny --follow   # connections policy denies, with the rule, live (the pings above)")
	}
	fmt.Fprintf(&b, "  %s get nodes,pods -o wide%s\n", kubectl, vxlanHints(o, first))
	fmt.Fprintf(&b, `(the lab's pods have no kubelet to report them, so kubectl shows them READY 0/1; the pod
network itself is what the ping matrix above checked.)
namespaces: ip netns list | grep tl-%s
Ctrl-C stops the lab and removes everything.
`, id)
	return b.String()
}

// podAddrs is a pod's addresses, one per family.
func podAddrs(p *lab.Pod) string {
	if p.IP6.IsValid() && p.IP6 != p.IP {
		return p.IP.String() + ", " + p.IP6.String()
	}
	return p.IP.String()
}

// vxlanHints are the demo's pointers to the VXLAN dataplane of a node ("" without VXLAN).
func vxlanHints(o DemoOptions, n *lab.Node) string {
	if o.VXLAN == "" || o.Stub {
		return ""
	}
	var b strings.Builder
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		if f == ipfamily.IPv4 && !o.Families.IPv4Pods() || f == ipfamily.IPv6 && !o.Families.IPv6() {
			continue
		}
		dev := lab.VXLANDevice(f)
		fmt.Fprintf(&b, "\n  ip netns exec %s ip -d link show %s   # VNI, port, underlay address", n.NS, dev)
		fmt.Fprintf(&b, "\n  ip netns exec %s ip neigh show dev %s     # the other nodes' VTEP -> MAC", n.NS, dev)
		fmt.Fprintf(&b, "\n  ip netns exec %s bridge fdb show dev %s   # MAC -> their underlay address", n.NS, dev)
	}
	return b.String()
}

func pingAll(ctx context.Context, es []lab.Endpoint) *lab.Matrix {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return lab.PingMatrix(ctx, es, es)
}

func familiesName(f lab.Families) string {
	return map[lab.Families]string{lab.IPv4Only: "IPv4", lab.DualStack: "dual-stack", lab.IPv6Only: "IPv6-only"}[f]
}

// Cleanup removes what labs whose process died left behind.
func Cleanup(ctx context.Context, w io.Writer) error {
	left, err := lab.Cleanup(ctx)
	if left.Empty() {
		fmt.Fprintln(w, "nothing to clean up")
	} else {
		fmt.Fprintf(w, "removed %s\n", left)
	}
	return err
}
