package iptables

import (
	"context"
	"fmt"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Jump is a rule of a chain tabby does not own that jumps to one of tabby's, and its position
// (0 = first).
type Jump struct {
	Pos  int
	Rule string
}

// Snapshot is tabby's part of one table as the kernel holds it: what `tabbyctl policy check`
// compares with what felix would write.
type Snapshot struct {
	// Chains are tabby's chains and their rules, in the writer's normal form (Normalize).
	Chains map[string][]string
	// Jumps are, per chain tabby does not own (FORWARD), its rules that jump to tabby's.
	Jumps map[string][]Jump
}

// Read reads tabby's chains of table with the save command of fam and backend, the way the
// writer reads them before it compares.
func Read(ctx context.Context, r cmdrun.Runner, fam ipfamily.Family, b Backend, table string) (Snapshot, error) {
	cmd := Command(fam, b, "-save")
	out, err := r.Run(ctx, cmd, []string{"-t", table}, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("read %s table: %w", table, err)
	}
	chains, refs := parseSave(out, table)
	s := Snapshot{Chains: chains, Jumps: map[string][]Jump{}}
	for chain, rs := range refs {
		for _, r := range rs {
			s.Jumps[chain] = append(s.Jumps[chain], Jump{Pos: r.pos, Rule: r.rule})
		}
	}
	return s, nil
}

// Normalize returns rule in the form the writer compares rules in (iptables-save's spelling);
// a rule it cannot split is returned as is.
func Normalize(rule string) string {
	if n, err := normalize(rule); err == nil {
		return n
	}
	return rule
}
