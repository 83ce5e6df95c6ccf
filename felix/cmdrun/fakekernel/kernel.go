// Package fakekernel is an in-memory kernel behind the iptables and ipset commands, for unit
// tests of felix's writers and of the managers that drive them. It implements cmdrun.Runner:
// it interprets iptables-restore and ipset restore scripts into tables and sets, answers
// iptables-save, ipset save and ipset list -n from them, records every call (so a test can say
// "one pod = one ipset restore with one add, no iptables-restore") and fails calls on demand.
//
// It checks what the real kernel refuses in the cases tabby meets: a jump to a missing chain,
// a rule naming a missing set, deleting a chain that is referenced or not empty, destroying a
// set a rule uses, swapping sets of different types. It does not canonicalise rules as
// iptables-save does (a rule reads back as written, blanks and quoting aside).
package fakekernel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tabbynet/tabby/felix/cmdrun"
)

// Call is one command run.
type Call struct {
	Name  string
	Args  []string
	Stdin string
}

func (c Call) String() string {
	s := strings.Join(append([]string{c.Name}, c.Args...), " ")
	if c.Stdin != "" {
		s += "\n" + c.Stdin
	}
	return s
}

// Failure makes matching calls fail without effect.
type Failure struct {
	Name     string // the command ("iptables-nft-restore", "ipset"); "" = any
	Contains string // a substring of the arguments or stdin; "" = any
	Times    int    // how many matching calls fail; 0 = 1
	ExitCode int    // 0 = 1
	Stderr   string
}

// Kernel is the fake. The zero value is not usable; call New.
type Kernel struct {
	mu       sync.Mutex
	calls    []Call
	failures []*Failure
	// tables by command flavour ("iptables-nft", "ip6tables-legacy") and table name.
	tables map[string]map[string]*table
	sets   map[string]*ipset
	inUse  map[string]int
	// DefaultBackend is what plain `iptables` is: "nft" unless set.
	DefaultBackend string
}

// New returns an empty kernel.
func New() *Kernel {
	return &Kernel{tables: map[string]map[string]*table{}, sets: map[string]*ipset{}, inUse: map[string]int{}, DefaultBackend: "nft"}
}

var _ cmdrun.Runner = (*Kernel)(nil)

// Run implements cmdrun.Runner.
func (k *Kernel) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := Call{Name: name, Args: slices.Clone(args), Stdin: string(stdin)}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, c)
	command := strings.Join(append([]string{name}, args...), " ")
	if f := k.failure(c); f != nil {
		code := f.ExitCode
		if code == 0 {
			code = 1
		}
		return nil, &cmdrun.Error{Command: command, ExitCode: code, Stderr: f.Stderr}
	}
	out, msg, code := k.dispatch(c)
	if code != 0 {
		return []byte(out), &cmdrun.Error{Command: command, ExitCode: code, Stderr: msg}
	}
	return []byte(out), nil
}

func (k *Kernel) failure(c Call) *Failure {
	for i, f := range k.failures {
		if f.Name != "" && f.Name != c.Name {
			continue
		}
		if f.Contains != "" && !strings.Contains(strings.Join(c.Args, " ")+"\n"+c.Stdin, f.Contains) {
			continue
		}
		if f.Times--; f.Times <= 0 {
			k.failures = slices.Delete(k.failures, i, i+1)
		}
		return f
	}
	return nil
}

func (k *Kernel) dispatch(c Call) (stdout, stderr string, code int) {
	if c.Name == "ipset" {
		return k.ipsetCommand(c)
	}
	flavour, suffix, ok := iptablesCommand(c.Name)
	if !ok {
		return "", c.Name + ": command not found", 127
	}
	if b := backendOf(flavour); b == "default" {
		flavour = strings.TrimSuffix(flavour, b) + k.DefaultBackend
	}
	if slices.Contains(c.Args, "--version") {
		bin := strings.SplitN(flavour, "-", 2)[0]
		return fmt.Sprintf("%s v1.8.9 (%s)\n", bin, map[string]string{"nft": "nf_tables", "legacy": "legacy"}[backendOf(flavour)]), "", 0
	}
	switch suffix {
	case "save":
		return k.save(flavour, c.Args), "", 0
	case "restore":
		return k.restore(flavour, c.Args, c.Stdin)
	}
	return "", c.Name + ": only --version, -save and -restore are modelled", 2
}

// iptablesCommand splits "ip6tables-legacy-restore" into "ip6tables-legacy" and "restore";
// plain "iptables" is "iptables-default".
func iptablesCommand(name string) (flavour, suffix string, ok bool) {
	parts := strings.Split(name, "-")
	if parts[0] != "iptables" && parts[0] != "ip6tables" {
		return "", "", false
	}
	backend := "default"
	if len(parts) > 1 && (parts[1] == "nft" || parts[1] == "legacy") {
		backend = parts[1]
		parts = slices.Concat(parts[:1], parts[2:])
	}
	if len(parts) > 2 {
		return "", "", false
	}
	if len(parts) == 2 {
		suffix = parts[1]
	}
	return parts[0] + "-" + backend, suffix, true
}

func backendOf(flavour string) string {
	_, b, _ := strings.Cut(flavour, "-")
	return b
}

// Fail arms a failure.
func (k *Kernel) Fail(f Failure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	k.failures = append(k.failures, &f)
}

// SetInUse makes the next n destroys of set fail with "in use", as the real kernel answers
// for an RCU grace period after the last rule using the set went.
func (k *Kernel) SetInUse(set string, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inUse[set] = n
}

// Calls returns every call so far.
func (k *Kernel) Calls() []Call {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.calls)
}

// CallsTo returns the calls of one command.
func (k *Kernel) CallsTo(name string) []Call {
	var out []Call
	for _, c := range k.Calls() {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls forgets the calls so far.
func (k *Kernel) ResetCalls() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = nil
}
