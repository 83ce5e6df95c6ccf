package tabbyctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/tabbyctl/nodestatus"
	"github.com/tabbynet/tabby/tabbyctl/vxlanview"
)

func (a *app) nodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Commands about tabby on a node",
	}
	var socket, socketDir, node string
	var timeout time.Duration
	status := &cobra.Command{
		Use:   "status",
		Short: "Whether tabby-node runs on this node, and its BGP sessions",
		Long: `Reads tabby-node's status socket on this machine (--socket, default
/var/run/tabby/bird.sock) and prints whether tabby-node is running and its BGP peers, one
table per family (IPv4, IPv6) as calicoctl prints them, each session with the routes it
received, accepted and sent per address family, and the configured peers that cannot get a
session. On a node whose tabby-node runs without BGP (--bgp=none) it says BGP is off. Exits
non-zero when tabby-node does not answer.

--node NAME reads the socket of node NAME under --socket-dir instead, for a host that runs
several nodes' tabby-node side by side or a directory where each node's run directory is
mounted: <--socket-dir>/NAME/bird.sock, or <--socket-dir>/NAME/run/bird.sock (the lab's
layout: --socket-dir <lab dir>/nodes, as the demo prints). It does not reach across the network.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := socket
			if node != "" {
				if cmd.Flags().Changed("socket") {
					return errors.New("give --socket or --node, not both")
				}
				path = nodestatus.NodeSocket(socketDir, node)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			err := nodestatus.Report(ctx, a.Out, path, dialStatus, time.Now())
			if errors.Is(err, nodestatus.ErrNotRunning) {
				return &exitError{code: 1, msg: err.Error()}
			}
			return err
		},
	}
	status.Flags().StringVar(&socket, "socket", nodestatus.DefaultSocket, "tabby-node's BGP status socket")
	status.Flags().StringVar(&node, "node", "", "read the status of node NAME from --socket-dir/NAME/bird.sock or --socket-dir/NAME/run/bird.sock")
	status.Flags().StringVar(&socketDir, "socket-dir", "/var/run/tabby/nodes", "directory of per-node run directories, for --node")
	status.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for tabby-node to answer")
	cmd.AddCommand(status, a.dataplaneCommand(), a.markRestartCommand())
	return cmd
}

// dataplaneCommand prints the VXLAN peers, as the nodes' devices hold them.
func (a *app) dataplaneCommand() *cobra.Command {
	var node, output string
	cmd := &cobra.Command{
		Use:   "dataplane [--node NAME]",
		Short: "The VXLAN peers: each node's VTEP, MAC, underlay address and the blocks behind it",
		Long: `Prints, for each family with a VXLAN pool, every node's VTEP (the address of its VXLAN
device), the device's MAC, its underlay address (its BGP address, whether or not BGP runs) and
the blocks routed to it through its VTEP (its blocks of the family's VXLAN pools, and the
addresses it borrowed in them): what every other node's routes, neighbour and FDB entries for
it are made of. It is computed from the API objects, read as tabby-node reads them. MISSING
says why a node's pods cannot be reached over VXLAN yet.

--node NAME shows the view of node NAME: its own row is left out, and the blocks of a
CrossSubnet pool on nodes of its subnet are in NATIVE (routed without VXLAN).`,
		Example: `  tabbyctl node dataplane
  tabbyctl node dataplane --node node-1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o: Unsupported value: %q: supported values: table, json", output)
			}
			c, err := a.cluster()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			nodes, err := c.Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list Nodes: %w", err)
			}
			pools, err := c.IPPools().List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list IPPools: %w", err)
			}
			blocks, err := c.IPAMBlocks().List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list IPAMBlocks: %w", err)
			}
			if node != "" && !slices.ContainsFunc(nodes.Items, func(n corev1.Node) bool { return n.Name == node }) {
				return fmt.Errorf("no Node %q", node)
			}
			ns, ps, bs := vxlanview.Parse(nodes.Items, pools.Items, blocks.Items)
			view := vxlanview.Compute(ns, ps, bs, node)
			if output == "json" {
				b, err := json.MarshalIndent(view, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.Out, "%s\n", b)
				return err
			}
			return vxlanview.Print(a.Out, view)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "show the view of node NAME")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// markRestartCommand sets or clears tabby.dev/bgp-restarting on a Node.
func (a *app) markRestartCommand() *cobra.Command {
	var forDur time.Duration
	var clearMark bool
	cmd := &cobra.Command{
		Use:   "mark-restart NODE (--for DURATION | --clear)",
		Short: "Announce a planned restart of a node that its tabby-node cannot announce itself",
		Long: `Sets the Node annotation tabby.dev/bgp-restarting to now + --for: until then, the node's
BGP peers treat a lost session with it as a graceful restart and keep its routes (a power cycle,
a link maintenance). A restart of tabby-node alone needs no mark. --clear removes the mark; a mark
also stops counting once its time has passed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if clearMark == (forDur > 0) {
				return errors.New("give --for DURATION (e.g. 10m) or --clear")
			}
			c, err := a.cluster()
			if err != nil {
				return err
			}
			var value any // JSON merge patch: null removes the annotation
			until := time.Now().Add(forDur).UTC().Truncate(time.Second)
			if !clearMark {
				value = until.Format(time.RFC3339)
			}
			body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1.AnnotationBGPRestarting: value}}})
			if err != nil {
				return err
			}
			if _, err := c.Nodes().Patch(cmd.Context(), args[0], types.MergePatchType, body); err != nil {
				return fmt.Errorf("mark node %s: %w", args[0], err)
			}
			if clearMark {
				fmt.Fprintf(a.Out, "node %s: restart mark cleared\n", args[0])
			} else {
				fmt.Fprintf(a.Out, "node %s: peers keep its routes through a lost session until %s\n", args[0], until.Format(time.RFC3339))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&forDur, "for", 0, "how long the restart may take")
	cmd.Flags().BoolVar(&clearMark, "clear", false, "remove the mark")
	return cmd
}

// dialStatus opens the status socket. It is a variable so the switch to bird/status's client
// is one line.
var dialStatus = nodestatus.Dial
