package tabbyctl

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/ui"
)

// uiCommand serves the web view from the backend newBackend builds: the cluster-wide reader of
// flows and BGP status that `tabbyctl flows` uses, with the operator's credentials.
func (a *app) uiCommand(newBackend func() (ui.Backend, error)) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a live web view of the cluster's flows and BGP mesh",
		Long: `Serves, on --listen (default 127.0.0.1:8080), a page that shows live the cluster's flow log
(filter by source, destination, verdict and node; denied flows highlighted with the policy rule
that denied them) and the BGP mesh drawn as a graph: nodes, route reflectors, external routers,
each session's state, BFD and routes accepted/received/sent. It runs here, with your kubeconfig's
credentials, and reads what 'tabbyctl flows' and 'tabbyctl node status' read; nothing new runs
in the cluster. Stop it with Ctrl-C.

Anyone who reaches the page reads the cluster's flows as you: keep --listen on a loopback address
unless you mean to share it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := newBackend()
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
			log := slog.New(slog.NewTextHandler(a.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
			return ui.Serve(cmd.Context(), l, b, ui.Options{Logger: log})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address and port to serve the page on")
	return cmd
}
