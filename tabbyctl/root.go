// Package tabbyctl is the command line of tabby, modelled on calicoctl: get/create/apply/
// replace/delete/patch of tabby's resources (and of tabby's view of a Node), node status, IPAM
// reports and repairs, version. It finds its cluster the way kubectl does.
package tabbyctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/internal/version"
)

// Streams are the command's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// app holds global flags and the lazily built client: `version` and `node status` work without
// a cluster.
type app struct {
	Streams
	kubeconfig string
	context    string
	client     *client.Client
}

func (a *app) cluster() (*client.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	cfg, err := client.LoadConfig(a.kubeconfig, a.context)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	a.client = c
	return c, nil
}

// exitError carries a non-zero exit status without the "Error:" line (the command already said
// what is wrong on stdout, e.g. an `ipam check` report).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// NewCommand builds the tabbyctl command tree.
func NewCommand(s Streams) *cobra.Command {
	a := &app{Streams: s}
	root := &cobra.Command{
		Use:           "tabbyctl",
		Short:         "Manage tabby, a pure-L3 pod network: pools, BGP, nodes, IPAM",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	pf := root.PersistentFlags()
	pf.StringVar(&a.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	pf.StringVar(&a.context, "context", "", "kubeconfig context to use")
	root.AddCommand(
		a.getCommand(),
		a.writeCommand("create", "Create resources from files; fails if one exists", modeCreate),
		a.writeCommand("apply", "Create resources from files, or replace them if they exist", modeApply),
		a.writeCommand("replace", "Replace existing resources from files", modeReplace),
		a.deleteCommand(),
		a.patchCommand(),
		a.nodeCommand(),
		a.ipamCommand(),
		a.policyCommand(),
		a.flowsCommand(),
		a.uiCommand(a.observeBackend),
		a.versionCommand(),
	)
	return root
}

// Main runs tabbyctl with args and returns the process exit status.
func Main(args []string, s Streams) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := NewCommand(s)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(s.Err, ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(s.Err, "Error:", err)
		return 1
	}
	return 0
}
