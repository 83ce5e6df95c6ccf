// Package nat masquerades traffic leaving the pod network, as Calico's natOutgoing does: one
// MASQUERADE rule in tabby's own chain matching two ipsets, so the rule count stays constant
// however many pools there are. Only tabby's chains, jump and sets are ever changed.
package nat

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-iptables/iptables"

	"github.com/tabbynet/tabby/felix/netnsrun"
)

const (
	Table          = "nat"
	ParentChain    = "POSTROUTING"
	PostRouting    = "tabby-POSTROUTING"
	NATOutgoing    = "tabby-nat-outgoing"
	MasqPoolsSet   = "tabby-masq-ipam-pools"
	AllPoolsSet    = "tabby-all-ipam-pools"
	tmpSuffix      = "-tmp"
	ipsetSetType   = "hash:net"
	ipsetSetFamily = "inet"
)

var (
	jumpRule = []string{"-j", PostRouting}
	toNAT    = []string{"-j", NATOutgoing}
	masqRule = []string{"-m", "set", "--match-set", MasqPoolsSet, "src", "-m", "set", "!", "--match-set", AllPoolsSet, "dst", "-j", "MASQUERADE", "--random-fully"}
)

// Backend names an iptables flavour.
type Backend string

const (
	BackendAuto   Backend = ""
	BackendLegacy Backend = "legacy"
	BackendNFT    Backend = "nft"
)

// Manager owns tabby's NAT rules and sets in one namespace.
type Manager struct {
	run     netnsrun.Runner
	ipt     *iptables.IPTables
	backend Backend
	log     *slog.Logger

	applied    bool
	masq, all  []netip.Prefix
	ipsetPath  string
	iptPath    string
	randomFull bool
}

// New detects the backend (unless given) inside the namespace and returns a manager.
func New(run netnsrun.Runner, backend Backend, log *slog.Logger) (*Manager, error) {
	if run == nil {
		run = netnsrun.Current
	}
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{run: run, log: log, ipsetPath: "ipset"}
	err := run(func() error {
		if backend == BackendAuto {
			backend = DetectBackend()
		}
		path, err := exec.LookPath("iptables-" + string(backend))
		if err != nil {
			return fmt.Errorf("iptables backend %s: %w", backend, err)
		}
		ipt, err := iptables.New(iptables.Path(path))
		if err != nil {
			return fmt.Errorf("iptables %s: %w", path, err)
		}
		m.ipt, m.iptPath, m.backend = ipt, path, backend
		m.randomFull = ipt.HasRandomFully()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Backend returns the backend in use.
func (m *Manager) Backend() Backend { return m.backend }

// DetectBackend picks the flavour the host already uses, as kube-proxy and Calico do: the one
// holding more rules (kube-proxy's chains count), else the one `iptables` itself is. Call it in
// the target namespace.
func DetectBackend() Backend {
	count := func(bin string) int {
		out, err := exec.Command(bin).Output()
		if err != nil {
			return -1
		}
		n := 0
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "-A ") || strings.HasPrefix(line, ":KUBE-") {
				n++
			}
		}
		return n
	}
	legacy, nft := count("iptables-legacy-save"), count("iptables-nft-save")
	switch {
	case legacy > nft:
		return BackendLegacy
	case nft > legacy:
		return BackendNFT
	}
	if out, err := exec.Command("iptables", "--version").Output(); err == nil && strings.Contains(string(out), "legacy") {
		return BackendLegacy
	}
	return BackendNFT
}

// Apply makes the NAT state match: masq are the natOutgoing pools, all every pool. force
// re-checks the kernel even when the inputs did not change (periodic resync).
func (m *Manager) Apply(masq, all []netip.Prefix, force bool) error {
	masq, all = sorted(masq), sorted(all)
	if m.applied && !force && slices.Equal(masq, m.masq) && slices.Equal(all, m.all) {
		return nil
	}
	err := m.run(func() error {
		if len(masq) == 0 {
			return m.remove()
		}
		return m.ensure(masq, all)
	})
	if err != nil {
		m.applied = false
		return err
	}
	m.applied, m.masq, m.all = true, masq, all
	return nil
}

func sorted(p []netip.Prefix) []netip.Prefix {
	out := slices.Clone(p)
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

func (m *Manager) ensure(masq, all []netip.Prefix) error {
	if err := m.ipsetRestore(RestoreScript(map[string][]netip.Prefix{MasqPoolsSet: masq, AllPoolsSet: all})); err != nil {
		return err
	}
	rule := masqRule
	if !m.randomFull {
		rule = masqRule[:len(masqRule)-1]
	}
	if err := m.ensureChain(NATOutgoing, rule); err != nil {
		return err
	}
	if err := m.ensureChain(PostRouting, toNAT); err != nil {
		return err
	}
	return m.ensureJumpOnce()
}

// ensureChain leaves chain holding exactly one rule.
func (m *Manager) ensureChain(chain string, rule []string) error {
	exists, err := m.ipt.ChainExists(Table, chain)
	if err != nil {
		return fmt.Errorf("check chain %s: %w", chain, err)
	}
	if !exists {
		if err := m.ipt.NewChain(Table, chain); err != nil {
			return fmt.Errorf("create chain %s: %w", chain, err)
		}
	} else {
		rules, err := m.ipt.List(Table, chain)
		if err != nil {
			return fmt.Errorf("list chain %s: %w", chain, err)
		}
		ok, err := m.ipt.Exists(Table, chain, rule...)
		if err != nil {
			return fmt.Errorf("check rule in %s: %w", chain, err)
		}
		// List returns "-N chain" and then the rules.
		if ok && len(rules) == 2 {
			return nil
		}
		if err := m.ipt.ClearChain(Table, chain); err != nil {
			return fmt.Errorf("flush chain %s: %w", chain, err)
		}
	}
	if err := m.ipt.Append(Table, chain, rule...); err != nil {
		return fmt.Errorf("add rule %v to %s: %w", rule, chain, err)
	}
	return nil
}

// ensureJumpOnce leaves exactly one jump from POSTROUTING to tabby's chain, without moving any
// other rule.
func (m *Manager) ensureJumpOnce() error {
	n, err := m.countJumps()
	if err != nil {
		return err
	}
	if n == 0 {
		if err := m.ipt.Insert(Table, ParentChain, 1, jumpRule...); err != nil {
			return fmt.Errorf("add jump %s -> %s: %w", ParentChain, PostRouting, err)
		}
	}
	for ; n > 1; n-- {
		if err := m.ipt.Delete(Table, ParentChain, jumpRule...); err != nil {
			return fmt.Errorf("delete duplicate jump %s -> %s: %w", ParentChain, PostRouting, err)
		}
	}
	return nil
}

func (m *Manager) countJumps() (int, error) {
	rules, err := m.ipt.List(Table, ParentChain)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", ParentChain, err)
	}
	n := 0
	for _, r := range rules {
		if strings.TrimSpace(r) == "-A "+ParentChain+" -j "+PostRouting {
			n++
		}
	}
	return n, nil
}

// remove takes away exactly what ensure added, in the order the kernel allows: the jump, the
// chains, then the sets they referenced.
func (m *Manager) remove() error {
	n, err := m.countJumps()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		if err := m.ipt.Delete(Table, ParentChain, jumpRule...); err != nil {
			return fmt.Errorf("delete jump %s -> %s: %w", ParentChain, PostRouting, err)
		}
	}
	for _, chain := range []string{PostRouting, NATOutgoing} {
		exists, err := m.ipt.ChainExists(Table, chain)
		if err != nil {
			return fmt.Errorf("check chain %s: %w", chain, err)
		}
		if exists {
			if err := m.ipt.ClearAndDeleteChain(Table, chain); err != nil {
				return fmt.Errorf("delete chain %s: %w", chain, err)
			}
		}
	}
	var script bytes.Buffer
	for _, set := range []string{MasqPoolsSet, AllPoolsSet, MasqPoolsSet + tmpSuffix, AllPoolsSet + tmpSuffix} {
		if m.setExists(set) {
			fmt.Fprintf(&script, "destroy %s\n", set)
		}
	}
	if script.Len() == 0 {
		return nil
	}
	// The kernel drops a rule's reference to its set after an RCU grace period: a destroy right
	// after the chain went can find the set still "in use".
	err = nil
	for attempt := 0; attempt < 20; attempt++ {
		if err = m.ipsetRestore(script.String()); err == nil || !strings.Contains(err.Error(), "in use") {
			return err
		}
		time.Sleep(25 * time.Millisecond)
	}
	return err
}

func (m *Manager) setExists(name string) bool {
	return exec.Command(m.ipsetPath, "list", "-n", name).Run() == nil
}

// RestoreScript builds an `ipset restore` script that fills each set atomically: a temporary
// set is filled and swapped in, so the MASQUERADE rule never sees a half-filled set.
func RestoreScript(sets map[string][]netip.Prefix) string {
	var b strings.Builder
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		tmp := name + tmpSuffix
		fmt.Fprintf(&b, "create %s %s family %s -exist\n", name, ipsetSetType, ipsetSetFamily)
		fmt.Fprintf(&b, "create %s %s family %s -exist\n", tmp, ipsetSetType, ipsetSetFamily)
		fmt.Fprintf(&b, "flush %s\n", tmp)
		for _, p := range sets[name] {
			fmt.Fprintf(&b, "add %s %s\n", tmp, p)
		}
		fmt.Fprintf(&b, "swap %s %s\n", tmp, name)
		fmt.Fprintf(&b, "destroy %s\n", tmp)
	}
	return b.String()
}

func (m *Manager) ipsetRestore(script string) error {
	cmd := exec.Command(m.ipsetPath, "restore")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ipset restore: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}
