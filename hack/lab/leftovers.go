package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// StateRoot holds one directory per running lab (owner pid, run dirs, logs, kubeconfigs).
const StateRoot = "/run/tabby-lab"

// NetnsPrefix starts the name of every namespace a lab makes: tl-<id>-<role>.
const NetnsPrefix = "tl-"

// The names in use; a test of the leftover logic swaps them so its fake dead lab cannot stop a
// real lab running beside it.
var (
	stateRoot   = StateRoot
	netnsPrefix = NetnsPrefix
)

// CleanupCommand is what a user runs to remove a dead lab's leftovers.
const CleanupCommand = "make demo-clean"

// owner identifies the process that owns a lab: its pid and start time (so a recycled pid is
// not mistaken for the owner).
type owner struct {
	PID   int
	Start string
}

func selfOwner() owner {
	return owner{PID: os.Getpid(), Start: procStart(os.Getpid())}
}

// procStart is field 22 of /proc/PID/stat (start time in clock ticks), "" if the process is gone.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	// The command name (field 2) may hold spaces; fields after its closing paren are plain.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func writeOwner(dir string, o owner) error {
	return os.WriteFile(filepath.Join(dir, "owner"), []byte(fmt.Sprintf("%d %s\n", o.PID, o.Start)), 0o644)
}

// makeStateDir makes a lab's state directory with its owner file already in it, so that a lab
// starting beside this one never sees the directory without an owner and takes it for a dead
// lab's. The directory is built under a hidden name and renamed; the rename fails if the id is
// taken.
func makeStateDir(dir string, o owner) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-")
	if err != nil {
		return fmt.Errorf("lab state directory: %w", err)
	}
	// MkdirTemp makes it 0700; the lab's routers (FRR runs as its own user) need to reach
	// their directories inside.
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("lab state directory: %w", err)
	}
	if err := writeOwner(tmp, o); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("lab state directory: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("lab state directory %s (lab id in use?): %w", dir, err)
	}
	return nil
}

func readOwner(dir string) (owner, error) {
	b, err := os.ReadFile(filepath.Join(dir, "owner"))
	if err != nil {
		return owner{}, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return owner{}, fmt.Errorf("%s/owner: malformed %q", dir, b)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return owner{}, fmt.Errorf("%s/owner: pid %q: %w", dir, f[0], err)
	}
	return owner{PID: pid, Start: f[1]}, nil
}

func (o owner) alive() bool { return o.PID > 0 && procStart(o.PID) == o.Start }

// labIDOf extracts the lab id from a namespace name tl-<id>-<role>.
func labIDOf(netns string) (string, bool) {
	if !strings.HasPrefix(netns, netnsPrefix) {
		return "", false
	}
	id, _, ok := strings.Cut(strings.TrimPrefix(netns, netnsPrefix), "-")
	return id, ok && id != ""
}

// Leftovers are the namespaces and state directories of labs whose owner is dead.
type Leftovers struct {
	Netns     []string
	StateDirs []string
}

func (l Leftovers) Empty() bool { return len(l.Netns) == 0 && len(l.StateDirs) == 0 }

// FindLeftovers lists what dead labs left behind. A lab that is still running (its owner
// process is alive) is not a leftover: two labs may run side by side.
func FindLeftovers() (Leftovers, error) {
	var l Leftovers
	dead := map[string]bool{}
	isDead := func(id string) bool {
		if d, ok := dead[id]; ok {
			return d
		}
		o, err := readOwner(filepath.Join(stateRoot, id))
		d := err != nil || !o.alive()
		dead[id] = d
		return d
	}
	names, err := listNetns()
	if err != nil {
		return l, fmt.Errorf("list network namespaces: %w", err)
	}
	for _, n := range names {
		if id, ok := labIDOf(n); ok && isDead(id) {
			l.Netns = append(l.Netns, n)
		}
	}
	ents, err := os.ReadDir(stateRoot)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return l, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") {
			// A state directory being made (see makeStateDir): a leftover only if its
			// maker wrote its owner and died before the rename.
			if o, err := readOwner(filepath.Join(stateRoot, e.Name())); err == nil && !o.alive() {
				l.StateDirs = append(l.StateDirs, filepath.Join(stateRoot, e.Name()))
			}
			continue
		}
		if isDead(e.Name()) {
			l.StateDirs = append(l.StateDirs, filepath.Join(stateRoot, e.Name()))
		}
	}
	sort.Strings(l.Netns)
	return l, nil
}

// Cleanup removes what dead labs left behind: kills the processes in their namespaces (agents,
// routers), deletes the namespaces and the state directories. Running labs are not touched.
func Cleanup(ctx context.Context) (Leftovers, error) {
	l, err := FindLeftovers()
	if err != nil {
		return l, err
	}
	var errs []error
	for _, n := range l.Netns {
		if err := delNetns(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range l.StateDirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return l, errors.Join(errs...)
}

func (l Leftovers) String() string {
	var b strings.Builder
	if len(l.Netns) > 0 {
		fmt.Fprintf(&b, "namespaces: %s", strings.Join(l.Netns, " "))
	}
	if len(l.StateDirs) > 0 {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "state: %s", strings.Join(l.StateDirs, " "))
	}
	return b.String()
}
