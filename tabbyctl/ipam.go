package tabbyctl

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/tabbyctl/printer"
)

// The ipam commands only format: the queries are the IPAM library's (ipam/report.go), the one
// implementation tabby-node's metrics and garbage collector read too.

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
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("--ip: Invalid value: %q: not an IP address", s)
	}
	return ip.Unmap(), nil
}

func (a *app) ipamStore() (*ipam.KubeStore, error) {
	c, err := a.cluster()
	if err != nil {
		return nil, err
	}
	return ipam.NewKubeStore(c), nil
}

func (a *app) ipamShow() *cobra.Command {
	var showBlocks bool
	var ipStr string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Per pool: addresses in total, in use and free; --show-blocks per block; --ip who holds it",
		Long: `Prints, per pool, its addresses in total, in use and free; beyond 2^32 (an IPv6 pool) the
counts are powers of two: a /48 holds 2^80 addresses. --show-blocks adds a line per block, with
the node it belongs to; --ip says who holds an address.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ip netip.Addr
			if ipStr != "" {
				var err error
				if ip, err = parseIP(ipStr); err != nil {
					return err
				}
			}
			store, err := a.ipamStore()
			if err != nil {
				return err
			}
			if ip.IsValid() {
				o, err := ipam.WhoHas(cmd.Context(), store, ip)
				allocated := err == nil
				if err != nil && !errors.Is(err, ipam.ErrNotAllocated) {
					return err
				}
				fmt.Fprintln(a.Out, ownerText(o, allocated))
				if !allocated {
					return &exitError{code: 1}
				}
				return nil
			}
			usage, err := ipam.GetUsage(cmd.Context(), store)
			if err != nil {
				return err
			}
			var rows [][]string
			for _, p := range usageRows(usage) {
				free := new(big.Int).Sub(p.total, big.NewInt(p.inUse))
				rows = append(rows, []string{"pool", p.name, p.cidr, "-", addressCount(p.total), i64(p.inUse), pct(p.inUse, p.total), addressCount(free)})
				if showBlocks {
					for _, b := range p.blocks {
						node := b.Node
						if node == "" {
							node = "(none)"
						}
						rows = append(rows, []string{"block", p.name, b.CIDR.String(), node, i64(int64(b.Size)), i64(int64(b.InUse)), pct(int64(b.InUse), big.NewInt(int64(b.Size))), i64(int64(b.Size - b.InUse))})
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

// poolRow is one pool of `ipam show` with its blocks.
type poolRow struct {
	name, cidr string
	total      *big.Int // an IPv6 pool's overflows an int64
	inUse      int64
	blocks     []ipam.BlockUsage
}

// usageRows groups the blocks under their pools, sorted by name; blocks no pool contains (their
// pool was deleted while addresses were still allocated) come last, under "(no pool)".
func usageRows(u ipam.Usage) []poolRow {
	var out []poolRow
	byName := map[string]int{}
	for _, p := range u.Pools {
		byName[p.Name] = len(out)
		out = append(out, poolRow{name: p.Name, cidr: p.CIDR.String(), total: p.Total, inUse: p.InUse})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	for i := range out {
		byName[out[i].name] = i
	}
	orphan := poolRow{name: "(no pool)", cidr: "-", total: new(big.Int)}
	for _, b := range u.Blocks {
		if i, ok := byName[b.Pool]; ok && b.Pool != "" {
			out[i].blocks = append(out[i].blocks, b)
			continue
		}
		orphan.blocks = append(orphan.blocks, b)
		orphan.total.Add(orphan.total, big.NewInt(int64(b.Size)))
		orphan.inUse += int64(b.InUse)
	}
	if len(orphan.blocks) > 0 {
		out = append(out, orphan)
	}
	return out
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// addressCount is a number of addresses as a reader takes it in: in digits up to 2^32, beyond
// (an IPv6 pool) as a power of two, exactly: 2^80 for a /48, 2^80-6 for what is free in it,
// without spaces so that a column stays one field for awk.
func addressCount(n *big.Int) string {
	const digitsUpTo = 32
	if n.BitLen() <= digitsUpTo {
		return n.String()
	}
	up := n.BitLen()
	if new(big.Int).Lsh(big.NewInt(1), uint(up-1)).Cmp(n) == 0 {
		return fmt.Sprintf("2^%d", up-1)
	}
	below := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(up)), n)
	if below.BitLen() <= digitsUpTo {
		return fmt.Sprintf("2^%d-%s", up, below)
	}
	f, _ := new(big.Float).SetInt(n).Float64()
	return strconv.FormatFloat(f, 'g', 4, 64)
}

func pct(part int64, total *big.Int) string {
	if total.Sign() == 0 {
		return "0%"
	}
	t, _ := new(big.Float).SetInt(total).Float64()
	return fmt.Sprintf("%.0f%%", float64(part)*100/t)
}

// ownerText is one human line about who holds an address (ipam.WhoHas).
func ownerText(o ipam.Owner, allocated bool) string {
	switch {
	case !o.Block.IsValid() && o.Pool == "":
		return fmt.Sprintf("%s is not in any IPPool", o.IP)
	case !o.Block.IsValid():
		return fmt.Sprintf("%s is in IPPool %s but no block holding it has been claimed: not allocated", o.IP, o.Pool)
	case !allocated:
		return fmt.Sprintf("%s is in block %s (%s) but not allocated", o.IP, o.Block, affinityText(o.BlockNode))
	}
	who := "handle " + o.Handle
	if o.Pod != "" {
		who = fmt.Sprintf("pod %s/%s (handle %s)", o.Namespace, o.Pod, o.Handle)
	} else if t, node, ok := ipam.TunnelOf(o.Handle); ok {
		who = fmt.Sprintf("the %s tunnel of node %s (handle %s)", t.Name, node, o.Handle)
	}
	s := fmt.Sprintf("%s is allocated to %s in block %s (%s)", o.IP, who, o.Block, affinityText(o.BlockNode))
	if o.Node != "" {
		s += ", by node " + o.Node
	}
	return s
}

func affinityText(node string) string {
	if node == "" {
		return "no affinity"
	}
	return "affinity host:" + node
}

func (a *app) ipamCheck() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Report leaked allocations, pods without one, duplicate IPs, blocks of deleted nodes; exit 1 if any",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := a.ipamStore()
			if err != nil {
				return err
			}
			r, err := ipam.Check(cmd.Context(), store)
			if err != nil {
				return err
			}
			n := r.Checked
			fmt.Fprintf(a.Out, "Checked %d pools, %d blocks, %d allocations, %d handles, %d pods, %d nodes.\n",
				n.Pools, n.Blocks, n.Allocations, n.Handles, n.Pods, n.Nodes)
			probs := problems(r)
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
			store, err := a.ipamStore()
			if err != nil {
				return err
			}
			o, err := releaseIP(cmd.Context(), store, ip, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.Out, "Released %s (handle %s, block %s)\n", ip, o.Handle, o.Block)
			return nil
		},
	}
	cmd.Flags().StringVar(&ipStr, "ip", "", "the address to release")
	cmd.Flags().BoolVar(&force, "force", false, "release even if a live Pod uses the address")
	return cmd
}
