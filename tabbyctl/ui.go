package tabbyctl

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/apis/client"
	observeclient "github.com/tabbynet/tabby/observe/client"
	"github.com/tabbynet/tabby/ui"
)

// newBackend builds what the web view reads.
type newBackend func(ctx context.Context, o observeclient.Options) (ui.Backend, error)

// observeBackend is the cluster-wide reader of flows and BGP status `tabbyctl flows` uses, with
// the kubeconfig's credentials.
func (a *app) observeBackend(ctx context.Context, o observeclient.Options) (ui.Backend, error) {
	cfg, err := client.LoadConfig(a.kubeconfig, a.context)
	if err != nil {
		return nil, err
	}
	return observeclient.New(ctx, cfg, o)
}

// uiCommand serves the web view from the backend build makes.
func (a *app) uiCommand(build newBackend) *cobra.Command {
	var listen string
	var opts observeclient.Options
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a live web view of the cluster's flows and BGP mesh",
		Long: `Serves, on --listen (default 127.0.0.1:8080), a page that shows live the cluster's flow log
(filter by source, destination, verdict and node; denied flows highlighted with the policy rule
that denied them) and the BGP mesh drawn as a graph: nodes, route reflectors, external routers,
each session's state, BFD and routes accepted/received/sent. It runs here, with your kubeconfig's
credentials, and reads what 'tabbyctl flows' and 'tabbyctl node status' read; nothing new runs
in the cluster. Stop it with Ctrl-C.

Each node checks your token as for 'tabbyctl flows' (RBAC get on flows and bgpstatuses in group
tabby.dev). Anyone who reaches the page reads the cluster's flows as you: keep --listen on a
loopback address unless you mean to share it.`,
		Example: `  tabbyctl ui
  tabbyctl ui --listen 127.0.0.1:9000 --token "$(kubectl create token my-operator)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(a.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
			// A node that fails while the others answer: the page shows the others, the
			// terminal says which and why.
			opts.OnNodeError = func(node string, err error) { log.Warn("node did not answer", "node", node, "err", err) }
			b, err := build(cmd.Context(), opts)
			if err != nil {
				return err
			}
			l, err := ui.Listen(listen)
			if err != nil {
				return err
			}
			if !ui.Loopback(l) {
				fmt.Fprintf(a.Err, "warning: %s is not a loopback address: whoever reaches it reads the cluster's flows with your credentials\n", l.Addr())
			}
			fmt.Fprintf(a.Out, "tabby web view: %s (Ctrl-C to stop)\n", ui.URL(l))
			return ui.Serve(cmd.Context(), l, b, ui.Options{Logger: log})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:8080", "address and port to serve the page on")
	fl.StringVar(&opts.CAFile, "ca-file", "", "CA of the nodes' serving certificate (default: ca.crt of the chart's Secret)")
	fl.StringVar(&opts.Token, "token", "", "bearer token the nodes check (default: the kubeconfig's)")
	return cmd
}
