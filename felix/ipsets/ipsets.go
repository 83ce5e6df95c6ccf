// Package ipsets writes tabby's ipsets in one network namespace (set names are global there,
// across families, so one IPSets serves IPv4 and IPv6). Callers state the sets they want
// (SetMembers, RemoveSet); felix applies them in two steps around the iptables tables:
// ApplyUpdates creates and fills sets before any rule can name them, ApplyDeletions destroys
// the unwanted ones after the rules that named them are gone. tabby owns exactly the sets
// named tabby-…; no other set is read back or changed.
package ipsets

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
	"time"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

const (
	// Prefix marks tabby's sets.
	Prefix = "tabby-"
	// TempSet is filled and swapped in when a set is rewritten as a whole; it is never
	// referenced by a rule.
	TempSet = Prefix + "tmp"
	// maxName is the kernel's limit (IPSET_MAXNAMELEN less the NUL).
	maxName = 31
	// maxElem: policy sets can hold every pod of a large cluster; 65536 (ipset's default)
	// would make an add fail there.
	maxElem         = 1 << 20
	defaultAttempts = 3
)

// Options configure IPSets.
type Options struct {
	Runner cmdrun.Runner
	Log    *slog.Logger
	// Attempts bounds the restores one ApplyUpdates tries, re-reading the kernel before each
	// retry; 0 = 3.
	Attempts int
	// InUseTimeout is how long ApplyDeletions retries a set the kernel still calls in use:
	// a rule's reference is dropped an RCU grace period after the rule, not with it; 0 = 1 s.
	InUseTimeout time.Duration
}

// IPSets is tabby's sets in one namespace. It is not safe for concurrent use.
type IPSets struct {
	run     cmdrun.Runner
	log     *slog.Logger
	tries   int
	inUse   time.Duration
	desired map[string]*set
	invalid map[string]error
	kernel  map[string]*set // tabby's sets as of the last read plus every write since
	known   bool
	dirty   map[string]struct{}
	hold    bool
	// stale: the kernel may hold sets no longer wanted (after a read or a RemoveSet), so
	// ApplyDeletions must look; otherwise it returns at once, without scanning every set.
	stale bool
	// busy: when the kernel first called a set in use. The wait for it is bounded across
	// calls, so a set some foreign rule keeps using does not stall every apply.
	busy map[string]time.Time
}

type set struct {
	typ     string
	fam     ipfamily.Family
	members map[string]string // element -> flags ("nomatch" or "")
}

func (s *set) sameType(o *set) bool { return s.typ == o.typ && s.fam == o.fam }

// New returns the sets of the namespace r runs in; nothing runs before the first apply.
func New(o Options) (*IPSets, error) {
	if o.Runner == nil {
		return nil, errors.New("ipsets: Runner is required")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Attempts <= 0 {
		o.Attempts = defaultAttempts
	}
	if o.InUseTimeout <= 0 {
		o.InUseTimeout = time.Second
	}
	return &IPSets{
		run: o.Runner, log: o.Log.With("writer", "ipsets"), tries: o.Attempts, inUse: o.InUseTimeout,
		desired: map[string]*set{}, invalid: map[string]error{}, kernel: map[string]*set{}, dirty: map[string]struct{}{},
		busy: map[string]time.Time{},
	}, nil
}

// SetMembers makes name a set of type typ ("hash:ip", "hash:net", "hash:ip,port") and family
// fam holding exactly members, in `ipset add` syntax ("10.0.0.0/24 nomatch", "10.0.0.1,tcp:80").
// A set or member the writer refuses is reported by Refused until it is set again or removed,
// and the kernel keeps what it had.
func (s *IPSets) SetMembers(name, typ string, fam ipfamily.Family, members []string) {
	want, err := newSet(name, typ, fam, members)
	if err != nil {
		s.invalid[name] = fmt.Errorf("ipset %s: %w", name, err)
		return
	}
	delete(s.invalid, name)
	delete(s.busy, name)
	if old, ok := s.desired[name]; ok && old.sameType(want) && maps.Equal(old.members, want.members) {
		return
	}
	s.desired[name] = want
	s.dirty[name] = struct{}{}
}

func newSet(name, typ string, fam ipfamily.Family, members []string) (*set, error) {
	if !strings.HasPrefix(name, Prefix) || name == TempSet {
		return nil, fmt.Errorf("not tabby's (the name must start with %q and not be %s)", Prefix, TempSet)
	}
	if len(name) > maxName || strings.ContainsAny(name, " \t\n") {
		return nil, fmt.Errorf("not a valid set name (at most %d characters, no blanks)", maxName)
	}
	if fam != ipfamily.IPv4 && fam != ipfamily.IPv6 {
		return nil, fmt.Errorf("family %s", fam)
	}
	ds, err := dims(typ)
	if err != nil {
		return nil, err
	}
	want := &set{typ: typ, fam: fam, members: make(map[string]string, len(members))}
	for _, m := range members {
		elem, flags, err := normalizeMember(ds, fam, m, true)
		if err != nil {
			return nil, err
		}
		if old, dup := want.members[elem]; dup && old != flags {
			return nil, fmt.Errorf("member %s both with and without nomatch", elem)
		}
		want.members[elem] = flags
	}
	return want, nil
}

// RemoveSet makes name unwanted: ApplyDeletions destroys it (unless deletions are held).
func (s *IPSets) RemoveSet(name string) {
	delete(s.invalid, name)
	delete(s.desired, name)
	delete(s.dirty, name)
	s.stale = true
}

// QueueResync makes the next apply re-read the kernel's sets.
func (s *IPSets) QueueResync() { s.known = false }

// HoldDeletes stops ApplyDeletions from destroying sets (felix holds deletions until its inputs
// are in sync), or lets it again.
func (s *IPSets) HoldDeletes(hold bool) { s.hold = hold }

// ApplyUpdates creates the wanted sets the kernel lacks and writes the member changes of the
// others, all in one `ipset restore` (more only when one fails: the kernel is re-read and the
// write retried, a bounded number of times). Only the delta is written; a set whose members
// are mostly replaced is filled under a temporary name and swapped in, so a rule never sees it
// half-filled. Nothing runs when nothing changed.
func (s *IPSets) ApplyUpdates(ctx context.Context) error {
	if _, tmp := s.kernel[TempSet]; s.known && len(s.dirty) == 0 && !tmp {
		return nil
	}
	var err error
	for attempt := 1; attempt <= s.tries; attempt++ {
		if attempt > 1 {
			s.log.Warn("ipset restore failed: re-reading the sets and retrying", "attempt", attempt, "error", err)
			if werr := wait(ctx, 50*time.Millisecond*time.Duration(attempt-1)); werr != nil {
				return fmt.Errorf("ipsets: %w (after: %w)", werr, err)
			}
		}
		if !s.known {
			if err = s.read(ctx); err != nil {
				continue
			}
		}
		script, lines, names := s.plan()
		if len(lines) == 0 {
			return nil
		}
		if _, err = s.run.Run(ctx, "ipset", []string{"restore"}, script); err != nil {
			err = lineError(err, lines)
			s.known = false
			continue
		}
		for _, name := range names {
			s.kernel[name] = s.desired[name]
			delete(s.dirty, name)
		}
		delete(s.kernel, TempSet)
		return nil
	}
	return fmt.Errorf("ipsets: %w", err)
}

// Refused reports the sets the writer refused (a name that is not tabby's, a member it cannot
// parse); they stay as they were in the kernel until they are set again or removed.
func (s *IPSets) Refused() error {
	if len(s.invalid) == 0 {
		return nil
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(s.invalid)) {
		errs = append(errs, s.invalid[k])
	}
	return errors.Join(errs...)
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// read replaces the kernel view with `ipset save`'s tabby sets.
func (s *IPSets) read(ctx context.Context) error {
	out, err := s.run.Run(ctx, "ipset", []string{"save"}, nil)
	if err != nil {
		return fmt.Errorf("read kernel state: %w", err)
	}
	s.kernel = parseSave(out, s.log)
	s.stale = true
	for name := range s.desired {
		s.dirty[name] = struct{}{}
	}
	s.known = true
	return nil
}

func parseSave(out []byte, log *slog.Logger) map[string]*set {
	sets := map[string]*set{}
	dimsOf := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[1], Prefix) {
			continue
		}
		switch f[0] {
		case "create":
			st := &set{typ: f[2], members: map[string]string{}}
			for i := 3; i+1 < len(f); i++ {
				if f[i] == "family" {
					st.fam = map[string]ipfamily.Family{"inet": ipfamily.IPv4, "inet6": ipfamily.IPv6}[f[i+1]]
				}
			}
			sets[f[1]] = st
			if ds, err := dims(f[2]); err == nil {
				dimsOf[f[1]] = ds
			}
		case "add":
			st, ok := sets[f[1]]
			if !ok {
				continue
			}
			member := strings.Join(f[2:], " ")
			elem, flags, err := normalizeMember(dimsOf[f[1]], st.fam, member, false)
			if err != nil {
				// Not a set tabby would write: keep the raw element, so it shows as a difference.
				log.Debug("ipset member not understood", "set", f[1], "member", member, "error", err)
				elem = f[2]
			}
			st.members[elem] = flags
		}
	}
	return sets
}

// plan renders the dirty sets as one restore script. lines[i] names the set line i+1 of the
// script writes, to name it in an error; names are the sets the script brings up to date.
func (s *IPSets) plan() (script []byte, lines, names []string) {
	var b bytes.Buffer
	line := func(set, format string, args ...any) {
		fmt.Fprintf(&b, format+"\n", args...)
		lines = append(lines, set)
	}
	if _, ok := s.kernel[TempSet]; ok {
		// Left by a felix that stopped mid-swap; never referenced by a rule.
		line(TempSet, "destroy %s", TempSet)
	}
	// create makes set into, for the wanted set name (named in errors).
	create := func(name, into string, want *set) {
		line(name, "create %s %s family %s maxelem %d", into, want.typ, want.fam.IPSetFamily(), maxElem)
	}
	for _, name := range slices.Sorted(maps.Keys(s.dirty)) {
		want, ok := s.desired[name]
		if !ok {
			delete(s.dirty, name)
			continue
		}
		have, exists := s.kernel[name]
		switch {
		case !exists:
			create(name, name, want)
			addAll(line, name, name, want)
		case !have.sameType(want):
			// The kernel swaps only sets of the same type and family. A set rules still use
			// cannot be destroyed: then this fails, naming the set; name sets by type and
			// family so it never has to happen.
			line(name, "destroy %s", name)
			create(name, name, want)
			addAll(line, name, name, want)
		default:
			var adds, dels []string
			for elem, flags := range have.members {
				if wf, ok := want.members[elem]; !ok || wf != flags {
					dels = append(dels, elem)
				}
			}
			for elem, flags := range want.members {
				if hf, ok := have.members[elem]; !ok || hf != flags {
					adds = append(adds, elem)
				}
			}
			switch {
			case len(adds)+len(dels) == 0:
				delete(s.dirty, name)
				continue
			case len(dels) > 0 && len(adds)+len(dels) >= len(want.members):
				// Mostly a new set: writing the delta in place would briefly leave rules a set
				// missing old and new members alike.
				create(name, TempSet, want)
				addAll(line, name, TempSet, want)
				line(name, "swap %s %s", TempSet, name)
				line(name, "destroy %s", TempSet)
			default:
				slices.Sort(dels)
				slices.Sort(adds)
				for _, e := range dels {
					line(name, "del %s %s", name, e)
				}
				for _, e := range adds {
					line(name, "add %s %s", name, member(e, want.members[e]))
				}
			}
		}
		names = append(names, name)
	}
	return b.Bytes(), lines, names
}

func addAll(line func(set, format string, args ...any), name, into string, want *set) {
	for _, e := range slices.Sorted(maps.Keys(want.members)) {
		line(name, "add %s %s", into, member(e, want.members[e]))
	}
}

func member(elem, flags string) string {
	if flags == "" {
		return elem
	}
	return elem + " " + flags
}

var lineRE = regexp.MustCompile(`Error in line (\d+)`)

// lineError names the set whose line `ipset restore` refused.
func lineError(err error, lines []string) error {
	if m := lineRE.FindStringSubmatch(cmdrun.Stderr(err)); m != nil {
		if n, _ := strconv.Atoi(m[1]); n >= 1 && n <= len(lines) {
			return fmt.Errorf("ipset %s: %w", lines[n-1], err)
		}
	}
	return fmt.Errorf("ipset restore: %w", err)
}

// ApplyDeletions destroys tabby's sets that are not wanted, those found in the kernel at a
// resync included; call it after the rules that used them are gone. A set the kernel still
// calls in use is retried until InUseTimeout, then reported and retried by a later call.
func (s *IPSets) ApplyDeletions(ctx context.Context) error {
	if s.hold || (s.known && !s.stale) {
		return nil
	}
	if !s.known {
		if err := s.read(ctx); err != nil {
			return fmt.Errorf("ipsets: %w", err)
		}
	}
	var pending []string
	for name := range s.kernel {
		if _, ok := s.desired[name]; !ok {
			pending = append(pending, name)
		}
	}
	slices.Sort(pending)
	var errs []error
	for len(pending) > 0 {
		var script bytes.Buffer
		for _, name := range pending {
			fmt.Fprintf(&script, "destroy %s\n", name)
		}
		_, err := s.run.Run(ctx, "ipset", []string{"restore"}, script.Bytes())
		if err == nil {
			for _, name := range pending {
				delete(s.kernel, name)
				delete(s.busy, name)
			}
			break
		}
		if ctx.Err() != nil {
			errs = append(errs, err)
			break
		}
		// ipset restore stops at the first failure, and batches what it sends: ask the
		// kernel which sets are left rather than trust the line number for the earlier ones.
		failed := ""
		if m := lineRE.FindStringSubmatch(cmdrun.Stderr(err)); m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= 1 && n <= len(pending) {
				failed = pending[n-1]
			}
		}
		left, lerr := s.listNames(ctx)
		if lerr != nil || failed == "" {
			s.known = false
			errs = append(errs, lineError(err, pending), lerr)
			break
		}
		var next []string
		for _, name := range pending {
			if !left[name] {
				delete(s.kernel, name)
				delete(s.busy, name)
				continue
			}
			if name == failed {
				inUse := strings.Contains(cmdrun.Stderr(err), "in use")
				if inUse {
					if _, ok := s.busy[name]; !ok {
						s.busy[name] = time.Now()
					}
				}
				if !inUse || time.Since(s.busy[name]) > s.inUse {
					errs = append(errs, fmt.Errorf("ipset %s: destroy: %w", name, err))
					continue
				}
			}
			next = append(next, name)
		}
		if len(next) > 0 && slices.Contains(next, failed) {
			if werr := wait(ctx, 20*time.Millisecond); werr != nil {
				errs = append(errs, werr)
				break
			}
		}
		pending = next
	}
	if len(errs) == 0 {
		s.stale = false
	}
	return errors.Join(errs...)
}

func (s *IPSets) listNames(ctx context.Context) (map[string]bool, error) {
	out, err := s.run.Run(ctx, "ipset", []string{"list", "-n"}, nil)
	if err != nil {
		return nil, fmt.Errorf("ipset list: %w", err)
	}
	names := map[string]bool{}
	for _, n := range strings.Fields(string(out)) {
		names[n] = true
	}
	return names, nil
}
