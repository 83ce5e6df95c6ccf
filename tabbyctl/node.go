package tabbyctl

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/tabbyctl/nodestatus"
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
/var/run/tabby/bird.sock) and prints whether tabby-node is running and its IPv4 BGP peers.
Exits non-zero when tabby-node does not answer.

--node NAME reads <--socket-dir>/NAME/bird.sock instead: the layout of a host that runs several
nodes' tabby-node side by side (the lab), or of a directory where each node's run directory is
mounted. It does not reach across the network.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := socket
			if node != "" {
				if cmd.Flags().Changed("socket") {
					return errors.New("give --socket or --node, not both")
				}
				path = filepath.Join(socketDir, node, filepath.Base(nodestatus.DefaultSocket))
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
	status.Flags().StringVar(&node, "node", "", "read the status of this node from --socket-dir/NAME/bird.sock")
	status.Flags().StringVar(&socketDir, "socket-dir", "/var/run/tabby/nodes", "directory of per-node run directories, for --node")
	status.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for tabby-node to answer")
	cmd.AddCommand(status)
	return cmd
}

// dialStatus opens the status socket. It is a variable so the switch to bird/status's client
// is one line.
var dialStatus = nodestatus.Dial
