// Package iptables writes tabby's chains into one iptables table of one family, as Calico's
// table does: callers state the chains they want (UpdateChain, RemoveChain) and the jumps tabby
// keeps at the top of kernel chains (SetBaseJumps); Apply brings the kernel there with one
// `iptables-restore --noflush` that rewrites only the chains that differ from what the kernel
// holds. tabby owns exactly the chains named tabby-… and the rules in other chains that jump to
// them; nothing else in the table is read back, rewritten or reordered.
//
// Rules are iptables arguments after "-A <chain>", compared with what iptables-save prints.
// Callers must therefore render them in iptables-save's canonical form ("-s 10.0.0.1/32", not
// "-s 10.0.0.1"; "-p tcp -m tcp --dport 80"; matches in the order save prints them), or every
// resync finds the chain "changed" and rewrites it. Blanks and quoting are forgiven, nothing
// else: a looser comparison could hide a real difference.
package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

const (
	// Prefix marks what tabby owns: chains (and ipsets) whose name starts with it.
	Prefix = "tabby-"
	// maxChainName is the kernel's limit (XT_EXTENSION_MAXNAMELEN less the NUL).
	maxChainName    = 28
	defaultAttempts = 3
	// lockWait is iptables-restore's -w: how long to wait for the xtables lock another
	// iptables user holds before failing (and retrying after a re-read).
	lockWait = "10"
)

// Options configure a Table.
type Options struct {
	Family ipfamily.Family
	Table  string // "filter", "nat", "raw", "mangle"
	// Backend must be resolved: BackendLegacy or BackendNFT (see DetectBackend).
	Backend Backend
	Runner  cmdrun.Runner
	Log     *slog.Logger
	// Attempts bounds the restores one Apply tries, re-reading the kernel before each retry;
	// 0 = 3.
	Attempts int
	// RetryPause is the wait before a retry; 0 = 50 ms.
	RetryPause time.Duration
}

// Table is one iptables table of one family. It is not safe for concurrent use: felix drives
// all writers from its apply loop.
type Table struct {
	fam     ipfamily.Family
	name    string
	backend Backend
	run     cmdrun.Runner
	log     *slog.Logger
	tries   int
	pause   time.Duration

	desired map[string][]string // chain -> normalised rules
	base    map[string][]string // kernel chain -> normalised jumps, in order
	invalid map[string]error    // chains and base chains whose last update was refused

	// The kernel as of the last read plus every restore since: tabby's chains and, per other
	// chain, the rules in it that jump into tabby's chains.
	kernel map[string][]string
	refs   map[string][]ref
	known  bool

	// dirty and dirtyBase name what may differ from the kernel; Apply looks only at them.
	dirty, dirtyBase map[string]struct{}
	hold             bool
}

// ref is a rule in a chain that is not tabby's, jumping into one that is.
type ref struct {
	pos  int // index in its chain, as read (or as written)
	rule string
}

// New returns a table; nothing runs before the first Apply.
func New(o Options) (*Table, error) {
	if o.Family != ipfamily.IPv4 && o.Family != ipfamily.IPv6 {
		return nil, fmt.Errorf("iptables table %s: family %s", o.Table, o.Family)
	}
	if o.Backend != BackendLegacy && o.Backend != BackendNFT {
		return nil, fmt.Errorf("iptables table %s: backend %q: want %q or %q", o.Table, o.Backend, BackendLegacy, BackendNFT)
	}
	if o.Table == "" || o.Runner == nil {
		return nil, errors.New("iptables table: Table and Runner are required")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Attempts <= 0 {
		o.Attempts = defaultAttempts
	}
	if o.RetryPause <= 0 {
		o.RetryPause = 50 * time.Millisecond
	}
	return &Table{
		fam: o.Family, name: o.Table, backend: o.Backend, run: o.Runner, tries: o.Attempts, pause: o.RetryPause,
		log:     o.Log.With("table", o.Table, "family", o.Family.String()),
		desired: map[string][]string{}, base: map[string][]string{}, invalid: map[string]error{},
		kernel: map[string][]string{}, refs: map[string][]ref{},
		dirty: map[string]struct{}{}, dirtyBase: map[string]struct{}{},
	}, nil
}

// Family is the table's address family.
func (t *Table) Family() ipfamily.Family { return t.fam }

// Name is the table's name ("filter", "nat").
func (t *Table) Name() string { return t.name }

// UpdateChain makes chain hold exactly rules (each the arguments after "-A <chain>", in
// iptables-save's canonical form). The chain must be tabby's; a chain or rule the table
// refuses is reported by Refused until it is updated or removed, and the kernel keeps what
// it had.
func (t *Table) UpdateChain(chain string, rules []string) {
	norm, err := normalizeChain(chain, rules)
	if err != nil {
		t.invalid[chain] = err
		return
	}
	delete(t.invalid, chain)
	if old, ok := t.desired[chain]; ok && slices.Equal(old, norm) {
		return
	}
	t.desired[chain] = norm
	t.dirty[chain] = struct{}{}
}

// UpdateChains is UpdateChain for each entry.
func (t *Table) UpdateChains(chains map[string][]string) {
	for _, name := range slices.Sorted(maps.Keys(chains)) {
		t.UpdateChain(name, chains[name])
	}
}

// RemoveChain deletes chain once nothing jumps to it any more (and not while deletions are
// held).
func (t *Table) RemoveChain(chain string) {
	delete(t.invalid, chain)
	delete(t.desired, chain)
	t.dirty[chain] = struct{}{}
}

// SetBaseJumps keeps rules, in this order, as the first rules of the kernel chain base (such as
// FORWARD or POSTROUTING), each exactly once; every rule must jump (-j/-g) to one of tabby's
// chains, which is how a restarted felix recognises them. Other rules in base are never
// touched: tabby's jumps are put back on top by deleting and re-inserting only them. No rules
// removes tabby's jumps from base.
func (t *Table) SetBaseJumps(base string, rules []string) {
	key := "base " + base
	norm, err := normalizeBase(base, rules)
	if err != nil {
		t.invalid[key] = err
		return
	}
	delete(t.invalid, key)
	if old, ok := t.base[base]; ok && slices.Equal(old, norm) {
		return
	}
	if len(norm) == 0 {
		if _, ok := t.base[base]; !ok {
			return
		}
		delete(t.base, base)
	} else {
		t.base[base] = norm
	}
	t.dirtyBase[base] = struct{}{}
}

// QueueResync makes the next Apply re-read the kernel and compare every chain.
func (t *Table) QueueResync() { t.known = false }

// HoldDeletes stops Apply from deleting chains and base jumps that are no longer wanted, or
// lets it again. felix holds deletions until its inputs are in sync, so a restart never removes
// rules the kernel still needs; what is held is deleted by the first Apply after.
func (t *Table) HoldDeletes(hold bool) { t.hold = hold }

func normalizeChain(chain string, rules []string) ([]string, error) {
	if !strings.HasPrefix(chain, Prefix) {
		return nil, fmt.Errorf("chain %s: not tabby's (the name must start with %q)", chain, Prefix)
	}
	if len(chain) > maxChainName || strings.ContainsAny(chain, " \t\n\"'") {
		return nil, fmt.Errorf("chain %s: not a valid chain name (at most %d characters, no blanks or quotes)", chain, maxChainName)
	}
	norm := make([]string, len(rules))
	for i, r := range rules {
		n, err := normalize(r)
		if err != nil {
			return nil, fmt.Errorf("chain %s: %w", chain, err)
		}
		norm[i] = n
	}
	return norm, nil
}

func normalizeBase(base string, rules []string) ([]string, error) {
	if strings.HasPrefix(base, Prefix) || base == "" || strings.ContainsAny(base, " \t\n\"'") {
		return nil, fmt.Errorf("base chain %q: must be a kernel (not tabby-) chain", base)
	}
	norm := make([]string, 0, len(rules))
	for _, r := range rules {
		n, err := normalize(r)
		if err != nil {
			return nil, fmt.Errorf("base chain %s: %w", base, err)
		}
		if !strings.HasPrefix(target(n), Prefix) {
			return nil, fmt.Errorf("base chain %s: rule %q does not jump to a %s chain", base, r, Prefix)
		}
		if slices.Contains(norm, n) {
			return nil, fmt.Errorf("base chain %s: rule %q twice", base, r)
		}
		norm = append(norm, n)
	}
	return norm, nil
}

// plan is one restore: what it writes and what the kernel holds once it succeeded.
type plan struct {
	write, del []string
	bases      map[string]basePlan
}

type basePlan struct {
	dels []string // kernel forms of the rules to delete, one -D each
	want []string
	kept []ref // stale jumps held
}

func (p *plan) empty() bool { return len(p.write) == 0 && len(p.del) == 0 && len(p.bases) == 0 }

// Apply brings the kernel to the desired state with at most one iptables-restore (more only
// when a restore fails: the kernel is re-read and the write retried, a bounded number of
// times). Nothing runs when nothing differs. Refused updates do not stop the rest; Refused
// reports them.
func (t *Table) Apply(ctx context.Context) error {
	if t.known && len(t.dirty) == 0 && len(t.dirtyBase) == 0 {
		return nil
	}
	var err error
	for attempt := 1; attempt <= t.tries; attempt++ {
		if attempt > 1 {
			t.log.Warn("iptables-restore failed: re-reading the table and retrying", "attempt", attempt, "error", err)
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s %s table: %w (after: %w)", t.fam, t.name, ctx.Err(), err)
			case <-time.After(t.pause * time.Duration(attempt-1)):
			}
		}
		if !t.known {
			if err = t.read(ctx); err != nil {
				continue
			}
		}
		p := t.plan()
		if p.empty() {
			return nil
		}
		script := t.script(p)
		if err = t.restore(ctx, script); err != nil {
			t.known = false
			continue
		}
		t.commit(p)
		return nil
	}
	return fmt.Errorf("%s %s table: %w", t.fam, t.name, err)
}

// Refused reports the updates the table refused (a chain that is not tabby's, a rule it
// cannot parse), which stay out of the kernel until they are replaced or removed.
func (t *Table) Refused() error {
	if len(t.invalid) == 0 {
		return nil
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(t.invalid)) {
		errs = append(errs, t.invalid[k])
	}
	return fmt.Errorf("%s %s table: %w", t.fam, t.name, errors.Join(errs...))
}

// read replaces the kernel view with iptables-save's and marks everything for comparison.
func (t *Table) read(ctx context.Context) error {
	out, err := t.run.Run(ctx, Command(t.fam, t.backend, "-save"), []string{"-t", t.name}, nil)
	if err != nil {
		return fmt.Errorf("read kernel state: %w", err)
	}
	t.load(out)
	return nil
}

// ReadTogether reads the kernel state of those of tables that must read it (after a resync
// was queued) with one save per family and backend rather than one per table: a resync of
// the filter and nat tables of two families costs two commands, not four, and the two run at
// once. A table whose read fails here reads itself in Apply.
func ReadTogether(ctx context.Context, tables []*Table) {
	type key struct {
		fam ipfamily.Family
		b   Backend
	}
	groups := map[key][]*Table{}
	for _, t := range tables {
		if !t.known {
			k := key{t.fam, t.backend}
			groups[k] = append(groups[k], t)
		}
	}
	var wg sync.WaitGroup
	for k, ts := range groups {
		if len(ts) < 2 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := ts[0].run.Run(ctx, Command(k.fam, k.b, "-save"), nil, nil)
			if err != nil {
				return
			}
			for _, t := range ts { // each table in one group only: no two goroutines share one
				t.load(out)
			}
		}()
	}
	wg.Wait()
}

// load replaces the kernel view with this table's part of iptables-save output and marks
// everything for comparison.
func (t *Table) load(out []byte) {
	t.kernel, t.refs = parseSave(out, t.name)
	for name := range t.kernel {
		t.dirty[name] = struct{}{}
	}
	for name := range t.desired {
		t.dirty[name] = struct{}{}
	}
	for name := range t.refs {
		t.dirtyBase[name] = struct{}{}
	}
	for name := range t.base {
		t.dirtyBase[name] = struct{}{}
	}
	t.known = true
}

// parseSave reads tabby's chains and the jumps into them from iptables-save output.
func parseSave(out []byte, table string) (map[string][]string, map[string][]ref) {
	chains, refs := map[string][]string{}, map[string][]ref{}
	count := map[string]int{}
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#':
		case line[0] == '*':
			in = line[1:] == table
		case !in:
		case line == "COMMIT":
			in = false
		case line[0] == ':':
			name, _, _ := strings.Cut(line[1:], " ")
			if strings.HasPrefix(name, Prefix) {
				if _, ok := chains[name]; !ok {
					chains[name] = []string{}
				}
			}
		case strings.HasPrefix(line, "-A "):
			chain, rule, _ := strings.Cut(line[3:], " ")
			if n, err := normalize(rule); err == nil {
				rule = n
			}
			if strings.HasPrefix(chain, Prefix) {
				chains[chain] = append(chains[chain], rule)
				continue
			}
			pos := count[chain]
			count[chain]++
			if strings.HasPrefix(target(rule), Prefix) {
				refs[chain] = append(refs[chain], ref{pos: pos, rule: rule})
			}
		}
	}
	return chains, refs
}

// plan compares what is dirty with the kernel; what turns out equal is clean from then on.
func (t *Table) plan() *plan {
	p := &plan{bases: map[string]basePlan{}}
	var stale []string
	for _, name := range slices.Sorted(maps.Keys(t.dirty)) {
		want, wanted := t.desired[name]
		have, exists := t.kernel[name]
		switch {
		case wanted && exists && slices.Equal(want, have):
			delete(t.dirty, name)
		case wanted:
			p.write = append(p.write, name)
		case exists && t.hold:
			// stays dirty: deleted once deletions are allowed
		case exists:
			stale = append(stale, name)
		default:
			delete(t.dirty, name)
		}
	}
	if len(stale) > 0 {
		// A chain some wanted rule still jumps to would make the whole restore fail: keep it
		// (and say why) rather than block every other change in the table.
		used := map[string]bool{}
		for _, rules := range t.desired {
			for _, r := range rules {
				used[target(r)] = true
			}
		}
		for _, rules := range t.base {
			for _, r := range rules {
				used[target(r)] = true
			}
		}
		for _, name := range stale {
			if used[name] {
				// Not dirty any more, so this is said once; the next resync looks again.
				t.log.Warn("stale chain kept: a wanted rule still jumps to it", "chain", name)
				delete(t.dirty, name)
				continue
			}
			p.del = append(p.del, name)
		}
	}
	for _, base := range slices.Sorted(maps.Keys(t.dirtyBase)) {
		want, have := t.base[base], t.refs[base]
		bp := basePlan{want: want}
		for _, r := range have {
			if t.hold && !slices.Contains(want, r.rule) {
				bp.kept = append(bp.kept, r)
				continue
			}
			bp.dels = append(bp.dels, r.rule)
		}
		onTop := len(bp.dels) == len(want) && len(have) >= len(want)
		for i := 0; onTop && i < len(want); i++ {
			onTop = have[i].pos == i && have[i].rule == want[i]
		}
		if onTop {
			if len(bp.kept) == 0 {
				delete(t.dirtyBase, base)
			}
			continue
		}
		p.bases[base] = bp
	}
	return p
}

// script renders p as iptables-restore input. Declaring a chain (":name - [0:0]") creates it
// or, with --noflush, empties it: every written chain is rebuilt from nothing inside the same
// commit, and chains to delete are emptied first, so stale chains jumping to each other do not
// block each other's deletion. All chains exist before any rule jumps to them, and jumps from
// kernel chains are gone before their targets are deleted.
func (t *Table) script(p *plan) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%s\n", t.name)
	for _, name := range p.write {
		fmt.Fprintf(&b, ":%s - [0:0]\n", name)
	}
	for _, name := range p.del {
		fmt.Fprintf(&b, ":%s - [0:0]\n", name)
	}
	for _, name := range p.write {
		for _, r := range t.desired[name] {
			fmt.Fprintf(&b, "-A %s %s\n", name, r)
		}
	}
	for _, base := range slices.Sorted(maps.Keys(p.bases)) {
		bp := p.bases[base]
		for _, r := range bp.dels {
			fmt.Fprintf(&b, "-D %s %s\n", base, r)
		}
		for i, r := range bp.want {
			fmt.Fprintf(&b, "-I %s %d %s\n", base, i+1, r)
		}
	}
	for _, name := range p.del {
		fmt.Fprintf(&b, "-X %s\n", name)
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}

var lineRE = regexp.MustCompile(`line:? (\d+)`)

func (t *Table) restore(ctx context.Context, script []byte) error {
	_, err := t.run.Run(ctx, Command(t.fam, t.backend, "-restore"), []string{"--noflush", "-w", lockWait}, script)
	if err == nil {
		return nil
	}
	// Name the line iptables-restore refused: its message alone often names no chain.
	if m := lineRE.FindStringSubmatch(cmdrun.Stderr(err)); m != nil {
		lines := strings.Split(string(script), "\n")
		if n, _ := strconv.Atoi(m[1]); n >= 1 && n <= len(lines) {
			return fmt.Errorf("iptables-restore line %d %q: %w", n, lines[n-1], err)
		}
	}
	return fmt.Errorf("iptables-restore: %w", err)
}

// commit records what a successful restore of p left in the kernel.
func (t *Table) commit(p *plan) {
	for _, name := range p.write {
		t.kernel[name] = t.desired[name]
		delete(t.dirty, name)
	}
	for _, name := range p.del {
		delete(t.kernel, name)
		delete(t.dirty, name)
	}
	for base, bp := range p.bases {
		refs := make([]ref, 0, len(bp.want)+len(bp.kept))
		for i, r := range bp.want {
			refs = append(refs, ref{pos: i, rule: r})
		}
		for i, r := range bp.kept {
			refs = append(refs, ref{pos: len(bp.want) + i, rule: r.rule})
		}
		if len(refs) == 0 {
			delete(t.refs, base)
		} else {
			t.refs[base] = refs
		}
		if len(bp.kept) == 0 {
			delete(t.dirtyBase, base)
		}
	}
	if len(p.write)+len(p.del) > 0 || len(p.bases) > 0 {
		t.log.Debug("iptables applied", "written", p.write, "deleted", p.del, "baseChains", slices.Sorted(maps.Keys(p.bases)))
	}
}
