package ipsets

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Set is one of tabby's sets as the kernel holds it: what `tabbyctl policy check` compares
// with what felix would write.
type Set struct {
	Type   string
	Family ipfamily.Family
	// Members in `ipset add` syntax and the writer's normal form ("10.0.0.0/24 nomatch"),
	// sorted.
	Members []string
}

// Read reads tabby's sets with `ipset save`, the way the writer reads them before it compares.
func Read(ctx context.Context, r cmdrun.Runner) (map[string]Set, error) {
	out, err := r.Run(ctx, "ipset", []string{"save"}, nil)
	if err != nil {
		return nil, fmt.Errorf("read ipsets: %w", err)
	}
	sets := map[string]Set{}
	for name, s := range parseSave(out, slog.New(slog.NewTextHandler(io.Discard, nil))) {
		sets[name] = s.export()
	}
	return sets, nil
}

// Normalize returns the set felix's writer would create for these arguments of SetMembers, in
// Read's form, or why the writer would refuse it.
func Normalize(name, typ string, fam ipfamily.Family, members []string) (Set, error) {
	s, err := newSet(name, typ, fam, members)
	if err != nil {
		return Set{}, fmt.Errorf("ipset %s: %w", name, err)
	}
	return s.export(), nil
}

func (s *set) export() Set {
	out := Set{Type: s.typ, Family: s.fam, Members: make([]string, 0, len(s.members))}
	for elem, flags := range s.members {
		out.Members = append(out.Members, member(elem, flags))
	}
	slices.Sort(out.Members)
	return out
}
