package tabbyctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/flow"
	observeclient "github.com/tabbynet/tabby/observe/client"
)

func (a *app) flowsCommand() *cobra.Command {
	var f flow.Filter
	var verdict, output string
	var follow bool
	var opts observeclient.Options
	cmd := &cobra.Command{
		Use:   "flows",
		Short: "The cluster's flow log: connections with the policy verdict and the rule that decided them",
		Long: `Reads every node's flow log (tabby-node --observe-addr, the chart's observe.enabled) and
prints it the way hubble observe does: when, which node, source -> destination:port/protocol, the
verdict and the rule that decided it (as tabbyctl policy show names it). Each node checks the
caller's token: RBAC must allow get on flows in group tabby.dev (the chart's tabby-observer
ClusterRole). Flow logs are recorded only while FelixConfiguration flowLogs.enabled is true.`,
		Example: `  tabbyctl flows --verdict deny --follow
  tabbyctl flows --from demo/client --to demo/ -o json
  tabbyctl flows --node node-1 --to 10.244.1.5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.Verdict = flow.Verdict(strings.ToLower(verdict))
			if err := checkFlowFlags(f, output); err != nil {
				return err
			}
			return a.flows(cmd.Context(), f, follow, output, opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing new flows as the nodes record them (Ctrl-C stops)")
	fl.StringVar(&f.From, "from", "", "flows from NAMESPACE/POD, NAMESPACE/ (its every pod) or an IP address")
	fl.StringVar(&f.To, "to", "", "flows to NAMESPACE/POD, NAMESPACE/ or an IP address")
	fl.StringVar(&verdict, "verdict", "", "allow or deny")
	fl.StringVar(&f.Node, "node", "", "the flows node NAME recorded only")
	fl.StringVarP(&output, "output", "o", "text", "text (one line a flow) or json (one object a line)")
	fl.StringVar(&opts.CAFile, "ca-file", "", "CA of the nodes' serving certificate (default: ca.crt of the chart's Secret)")
	fl.StringVar(&opts.Token, "token", "", "bearer token the nodes check (default: the kubeconfig's)")
	return cmd
}

// checkFlowFlags refuses flags that can match nothing, naming the flag and its value.
func checkFlowFlags(f flow.Filter, output string) error {
	if err := flow.CheckEndpoint("--from", f.From); err != nil {
		return err
	}
	if err := flow.CheckEndpoint("--to", f.To); err != nil {
		return err
	}
	if err := flow.CheckVerdict("--verdict", f.Verdict); err != nil {
		return err
	}
	if output != "text" && output != "json" {
		return fmt.Errorf("-o: Unsupported value: %q: supported values: text, json", output)
	}
	return nil
}

func (a *app) flows(ctx context.Context, f flow.Filter, follow bool, output string, opts observeclient.Options) error {
	cfg, err := client.LoadConfig(a.kubeconfig, a.context)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	failed := map[string]bool{}
	opts.OnNodeError = func(node string, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed[node] = true
		fmt.Fprintf(a.Err, "warning: node %s: %v\n", node, err)
	}
	c, err := observeclient.New(ctx, cfg, opts)
	if err != nil {
		return fmt.Errorf("%w (--ca-file and --token name the CA and the token)", err)
	}
	show := printFlowText(a.Out, time.Local)
	if output == "json" {
		enc := json.NewEncoder(a.Out)
		show = func(r flow.Record) error { return enc.Encode(r) }
	}
	err = c.Flows(ctx, f, follow, show)
	if follow && errors.Is(err, context.Canceled) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d node(s) did not answer: the flows above are the others'", len(failed))}
	}
	return nil
}

// printFlowText prints one flow a line, as hubble observe does.
func printFlowText(w io.Writer, loc *time.Location) func(flow.Record) error {
	return func(r flow.Record) error {
		_, err := fmt.Fprintln(w, flowLine(r, loc))
		return err
	}
}

// flowLine: time, node, source -> destination:port/protocol, verdict, the deciding rule, and
// how many connections the line stands for.
func flowLine(r flow.Record, loc *time.Location) string {
	dst := r.Dst.String()
	switch {
	case r.DstPort == 0: // ICMP
		dst += " " + r.Protocol
	case r.Dst.Pod == "":
		dst = netip.AddrPortFrom(r.Dst.IP, r.DstPort).String() + "/" + r.Protocol
	default:
		dst += ":" + strconv.Itoa(int(r.DstPort)) + "/" + r.Protocol
	}
	verdict := strings.ToUpper(string(r.Verdict))
	switch r.Verdict {
	case flow.Allow:
		verdict = "ALLOWED"
	case flow.Deny:
		verdict = "DENIED"
	}
	line := fmt.Sprintf("%s  %s  %s -> %s  %s  %s", r.Start.In(loc).Format("Jan _2 15:04:05.000"), r.Node, r.Src, dst, verdict, r.Rule)
	if r.Connections > 1 {
		line += fmt.Sprintf("  (%d connections)", r.Connections)
	}
	return line
}
