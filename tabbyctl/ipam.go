package tabbyctl

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/tabbyctl/ipamreport"
	"github.com/tabbynet/tabby/tabbyctl/printer"
)

func (a *app) ipamCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ipam",
		Short: "Pod address usage, consistency checks and repairs",
	}
	cmd.AddCommand(a.ipamShow(), a.ipamCheck(), a.ipamRelease())
	return cmd
}

func parseIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || !ip.Is4() {
		return netip.Addr{}, fmt.Errorf("--ip: Invalid value: %q: not an IPv4 address", s)
	}
	return ip, nil
}

func (a *app) ipamShow() *cobra.Command {
	var showBlocks bool
	var ipStr string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Per pool: addresses in total, in use and free; --show-blocks per block; --ip who holds it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ip netip.Addr
			if ipStr != "" {
				var err error
				if ip, err = parseIP(ipStr); err != nil {
					return err
				}
			}
			c, err := a.cluster()
			if err != nil {
				return err
			}
			d, err := ipamreport.Load(cmd.Context(), c)
			if err != nil {
				return err
			}
			if ip.IsValid() {
				h := ipamreport.Lookup(d, ip)
				fmt.Fprintln(a.Out, h.String())
				if !h.Allocated {
					return &exitError{code: 1}
				}
				return nil
			}
			usage := ipamreport.Usage(d)
			var rows [][]string
			for _, p := range usage {
				name := p.Name
				if name == "" {
					name = "(no pool)"
				}
				rows = append(rows, []string{"pool", name, p.CIDR, "-", u(p.Total), u(p.InUse), pct(p.InUse, p.Total), u(p.Free())})
				if showBlocks {
					for _, b := range p.Blocks {
						node := b.Node
						if node == "" {
							node = "(none)"
						}
						rows = append(rows, []string{"block", name, b.CIDR, node, u(b.Total), u(b.InUse), pct(b.InUse, b.Total), u(b.Total - b.InUse)})
					}
				}
			}
			if !showBlocks {
				for i := range rows {
					rows[i] = append(rows[i][1:3], rows[i][4:]...)
				}
				return printer.Table(a.Out, []string{"POOL", "CIDR", "IPS TOTAL", "IPS IN USE", "USE %", "IPS FREE"}, rows)
			}
			return printer.Table(a.Out, []string{"GROUPING", "POOL", "CIDR", "NODE", "IPS TOTAL", "IPS IN USE", "USE %", "IPS FREE"}, rows)
		},
	}
	cmd.Flags().BoolVar(&showBlocks, "show-blocks", false, "one line per block, with the node it belongs to")
	cmd.Flags().StringVar(&ipStr, "ip", "", "say who holds this address (exit status 1 when nobody does)")
	return cmd
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

func pct(part, total uint64) string {
	if total == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.0f%%", float64(part)*100/float64(total))
}

func (a *app) ipamCheck() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Report leaked allocations, pods without one, duplicate IPs, blocks of deleted nodes; exit 1 if any",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.cluster()
			if err != nil {
				return err
			}
			d, err := ipamreport.Load(cmd.Context(), c)
			if err != nil {
				return err
			}
			allocs := 0
			for _, b := range d.Blocks {
				allocs += len(b.Spec.Allocations)
			}
			fmt.Fprintf(a.Out, "Checked %d pools, %d blocks, %d allocations, %d handles, %d pods, %d nodes.\n",
				len(d.Pools), len(d.Blocks), allocs, len(d.Handles), len(d.Pods), len(d.Nodes))
			probs := ipamreport.Check(d)
			if len(probs) == 0 {
				fmt.Fprintln(a.Out, "No problems found.")
				return nil
			}
			fmt.Fprintf(a.Out, "Found %d problems:\n", len(probs))
			for _, p := range probs {
				fmt.Fprintln(a.Out, "  "+p.String())
			}
			return &exitError{code: 1, msg: fmt.Sprintf("ipam check: %d problems found", len(probs))}
		},
	}
}

func (a *app) ipamRelease() *cobra.Command {
	var ipStr string
	var force bool
	cmd := &cobra.Command{
		Use:   "release --ip IP",
		Short: "Free an allocated address (refused while a live Pod uses it, unless --force)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ipStr == "" {
				return errors.New("--ip is required")
			}
			ip, err := parseIP(ipStr)
			if err != nil {
				return err
			}
			c, err := a.cluster()
			if err != nil {
				return err
			}
			h, err := ipamreport.Release(cmd.Context(), c, ip, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.Out, "Released %s (handle %s, block %s)\n", ip, h.Handle, h.Block.Spec.CIDR)
			return nil
		},
	}
	cmd.Flags().StringVar(&ipStr, "ip", "", "the address to release")
	cmd.Flags().BoolVar(&force, "force", false, "release even if a live Pod uses the address")
	return cmd
}
