package tabbyctl

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/tabbyctl/manifest"
	"github.com/tabbynet/tabby/tabbyctl/printer"
)

func (a *app) getCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get KIND [NAME...]",
		Short: "Show resources: ippool, bgppeer (bgpp, bp), bgpconfig, felixconfig, node",
		Example: `  tabbyctl get ippool -o wide
  tabbyctl get bgppeer tor-1 -o yaml
  tabbyctl get felixconfig
  tabbyctl get node`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := printer.CheckFormat(output); err != nil {
				return err
			}
			r, err := lookupResource(args[0])
			if err != nil {
				return err
			}
			c, err := a.cluster()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var objs []manifest.Object
			if len(args) == 1 {
				if objs, err = r.list(ctx, c); err != nil {
					return err
				}
			} else {
				for _, name := range args[1:] {
					o, err := r.get(ctx, c, name)
					if err != nil {
						return err
					}
					objs = append(objs, o)
				}
			}
			if len(objs) == 0 && (output == "table" || output == "wide") {
				a.Err.Write([]byte("No resources found.\n"))
				return nil
			}
			var pc printer.Context
			if r.isLocal {
				pc.DefaultASN = defaultASN(ctx, c)
			}
			return printer.Objects(a.Out, output, toList(objs), pc)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, wide, yaml or json")
	return cmd
}

// defaultASN is the AS number nodes without their own inherit. Without a readable
// BGPConfiguration that is the built-in default, which is also what tabby-node would use.
func defaultASN(ctx context.Context, c *client.Client) uint32 {
	cfg, err := c.BGPConfigurations().Get(ctx, v1.DefaultBGPConfigurationName)
	if err == nil && cfg.Spec.ASNumber != nil {
		return *cfg.Spec.ASNumber
	}
	return v1.DefaultASNumber
}
