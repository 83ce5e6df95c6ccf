package tabbyctl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/tabbynet/tabby/apis/v1"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/felix/ipsets"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/felix/netnsrun"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Problem classes of `policy check`.
const (
	chainMissing  = "chain missing"
	chainDiffers  = "chain differs"
	chainStale    = "stale chain"
	jumpMissing   = "jump missing"
	setMissing    = "set missing"
	setDiffers    = "set differs"
	setStale      = "stale set"
	setRefused    = "set refused"
	familySkipped = "family not checked"
)

func (a *app) policyCheck() *cobra.Command {
	var node, netns, backend string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Compare a node's NetworkPolicy chains and ipsets with what the cluster's objects call for",
		Long: `Run on a node as root (in the tabby-node pod: kubectl exec ... -- tabbyctl policy check):
compute the node's NetworkPolicy chains and sets from the API objects, with felix's own
calculator, and compare them with tabby's chains in the filter table (iptables-save) and
tabby's policy ipsets (ipset save). Each difference is one line; the exit status is 1 when there
is any. Right after a change, a difference can be the node still applying it: run it again.

--netns reads the chains and sets of another network namespace, such as a lab node's (make demo
prints the command).`,
		Example: `  tabbyctl policy check
  tabbyctl policy check --node node-1 --netns tl-ab12-node-1   # a namespace "ip netns list" prints
  tabbyctl policy check --node node-1 --netns /proc/4242/ns/net`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node == "" {
				node = defaultNodeName()
			}
			b := iptables.Backend(backend)
			if !b.Valid() {
				return fmt.Errorf("--iptables-backend: Unsupported value: %q: supported values: \"\", %q, %q", backend, iptables.BackendLegacy, iptables.BackendNFT)
			}
			run := netnsrun.Current
			if netns != "" {
				r, closeNS, err := netnsrun.At(netnsPath(netns))
				if err != nil {
					return fmt.Errorf("--netns %s: %w", netns, err)
				}
				defer func() { _ = closeNS() }()
				run = r
			}
			in, err := a.policyInput(cmd.Context(), node)
			if err != nil {
				return err
			}
			flowLogs, err := a.flowLogsEnabled(cmd.Context())
			if err != nil {
				return err
			}
			probs, err := checkNodePolicy(cmd.Context(), cmdrun.InNamespace(run), b, in, flowLogs)
			if err != nil {
				return err
			}
			for _, p := range probs {
				fmt.Fprintln(a.Out, p)
			}
			if n := countReal(probs); n > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("policy check: node %s: %d problems", node, n)}
			}
			fmt.Fprintf(a.Out, "policy check: node %s: %d endpoints, %d NetworkPolicies, %d admin network policies: the kernel matches\n", node, len(in.Endpoints), len(in.Policies), len(in.Admin))
			return nil
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "the node this runs on (default: $NODE_NAME, else the hostname)")
	cmd.Flags().StringVar(&netns, "netns", "", "read the chains and sets of this network namespace instead of the current one: a name as \"ip netns list\" prints it, or a path")
	cmd.Flags().StringVar(&backend, "iptables-backend", "", "legacy or nft (default: detected as felix does)")
	return cmd
}

// namedNetnsDir is where `ip netns add NAME` mounts a named network namespace.
const namedNetnsDir = "/run/netns"

// netnsPath is the namespace file of --netns: a bare name is one `ip netns` lists.
func netnsPath(s string) string {
	if strings.Contains(s, "/") {
		return s
	}
	return filepath.Join(namedNetnsDir, s)
}

func defaultNodeName() string {
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}

func countReal(probs []problem) int {
	n := 0
	for _, p := range probs {
		if p.kind != familySkipped {
			n++
		}
	}
	return n
}

// flowLogsEnabled tells whether the FelixConfiguration turns flow logs on: felix's chains then
// log their verdicts.
func (a *app) flowLogsEnabled(ctx context.Context) (bool, error) {
	c, err := a.cluster()
	if err != nil {
		return false, err
	}
	fc, err := c.FelixConfigurations().Get(ctx, v1.DefaultFelixConfigurationName)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get FelixConfiguration %s: %w", v1.DefaultFelixConfigurationName, err)
	}
	return fc.Spec.FlowLogs != nil && fc.Spec.FlowLogs.Enabled, nil
}

// checkNodePolicy compares, per family felix programs, the rendering of in (with flow logs'
// NFLOG rules when on) with the kernel.
func checkNodePolicy(ctx context.Context, r cmdrun.Runner, b iptables.Backend, in policy.Input, flowLogs bool) ([]problem, error) {
	if b == iptables.BackendAuto {
		b = iptables.DetectBackend(ctx, r)
	}
	kernelSets, err := ipsets.Read(ctx, r)
	if err != nil {
		return nil, err
	}
	calc := policy.NewCalculator(in)
	calc.SetFlowLogs(flowLogs)
	var out []problem
	for _, fam := range ipfamily.All {
		chains, err := iptables.Read(ctx, r, fam, b, "filter")
		if err != nil {
			if fam == ipfamily.IPv4 {
				return nil, err
			}
			// felix does not program a family whose iptables does not work either.
			out = append(out, problem{kind: familySkipped, detail: fmt.Sprintf("%s: %v", fam, err)})
			continue
		}
		out = append(out, comparePolicy(fam, calc.Render(fam), chains, kernelSets)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].detail < out[j].detail
	})
	return out, nil
}

// comparePolicy lists how one family's kernel state differs from want. It only looks at what
// policy owns: the filter table's tabby chains, the jump from FORWARD, and the policy sets of
// the family (NAT's sets and chains are not its business).
func comparePolicy(fam ipfamily.Family, want policy.Rendered, got iptables.Snapshot, sets map[string]ipsets.Set) []problem {
	var out []problem
	add := func(kind, format string, args ...any) {
		out = append(out, problem{kind: kind, detail: fmt.Sprintf("%s: ", fam) + fmt.Sprintf(format, args...)})
	}
	for _, name := range sortedKeys(want.Chains) {
		rules := make([]string, len(want.Chains[name]))
		for i, r := range want.Chains[name] {
			rules[i] = iptables.Normalize(r)
		}
		have, ok := got.Chains[name]
		switch {
		case !ok:
			add(chainMissing, "%s (%d rules)", name, len(rules))
		case !slices.Equal(have, rules):
			add(chainDiffers, "%s: %s", name, lineDiff(rules, have))
		}
	}
	for _, name := range sortedKeys(got.Chains) {
		if _, ok := want.Chains[name]; !ok {
			add(chainStale, "%s (%d rules)", name, len(got.Chains[name]))
		}
	}
	for _, base := range []struct{ chain, jump string }{{policy.ParentChain, policy.JumpRule}, {policy.InputParentChain, policy.InputJumpRule}} {
		jumpFirst := false
		for _, j := range got.Jumps[base.chain] {
			if j.Pos == 0 && j.Rule == iptables.Normalize(base.jump) {
				jumpFirst = true
			}
		}
		if !jumpFirst {
			add(jumpMissing, "%s does not start with %q (its jumps to tabby: %v)", base.chain, base.jump, got.Jumps[base.chain])
		}
	}
	for _, name := range sortedKeys(want.IPSets) {
		w := want.IPSets[name]
		norm, err := ipsets.Normalize(name, w.Type, w.Family, w.Members)
		if err != nil {
			add(setRefused, "%v", err)
			continue
		}
		have, ok := sets[name]
		switch {
		case !ok:
			add(setMissing, "%s (%s, %d members)", name, w.Type, len(norm.Members))
		case have.Type != norm.Type || have.Family != norm.Family:
			add(setDiffers, "%s: type %s %s, want %s %s", name, have.Type, have.Family, norm.Type, norm.Family)
		case !slices.Equal(have.Members, norm.Members):
			add(setDiffers, "%s: %s", name, lineDiff(norm.Members, have.Members))
		}
	}
	for _, name := range sortedKeys(sets) {
		if _, ok := want.IPSets[name]; !ok && policy.IsSetName(name) && sets[name].Family == fam {
			add(setStale, "%s (%d members)", name, len(sets[name].Members))
		}
	}
	return out
}

// lineDiff says what is missing from have and what have has too many, in a few lines.
func lineDiff(want, have []string) string {
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, w)
		}
	}
	for _, h := range have {
		if !slices.Contains(want, h) {
			extra = append(extra, h)
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+quoteSome(missing))
	}
	if len(extra) > 0 {
		parts = append(parts, "unexpected "+quoteSome(extra))
	}
	if len(parts) == 0 {
		parts = append(parts, "same entries in another order")
	}
	return strings.Join(parts, "; ")
}

func quoteSome(s []string) string {
	const most = 5
	q := make([]string, 0, most)
	for i, x := range s {
		if i == most {
			q = append(q, fmt.Sprintf("and %d more", len(s)-most))
			break
		}
		q = append(q, strconv.Quote(x))
	}
	return strings.Join(q, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
