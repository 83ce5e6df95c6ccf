package felix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/felix/ipsets"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/felix/nat"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Writers are the shared writers felix applies once per pass for all managers: the iptables
// tables and the ipsets (a family felix does not program, no ip6tables or IPv6 off in the
// kernel, has no tables), and the main routing table, where each manager states the routes of
// its own routetable.Class.
type Writers struct {
	Filter, NAT map[ipfamily.Family]*iptables.Table
	IPSets      *ipsets.IPSets
	Routes      routetable.Writer
}

// Writers returns felix's writers, for a manager to write into (see AddManager).
func (f *Felix) Writers() Writers { return f.writers }

// AddManager makes m part of every pass: it gets each message felix hands its managers and its
// CompleteDeferredWork runs, after felix's own managers', before the writers apply. Call it
// before Run.
func (f *Felix) AddManager(m Manager) {
	f.dpMu.Lock()
	defer f.dpMu.Unlock()
	f.managers = append(f.managers, m)
}

// newWriters picks the iptables backend and the families to program, and builds the writers and
// the NAT and policy managers on them. Deletions are held from the start with WaitForInSync.
func (f *Felix) newWriters() error {
	if f.cmd == nil {
		f.cmd = cmdrun.InNamespace(f.run)
	}
	ctx := context.Background()
	backend := f.cfg.IptablesBackend
	if backend == iptables.BackendAuto {
		backend = iptables.DetectBackend(ctx, f.cmd)
	}
	feat, err := iptables.DetectFeatures(ctx, f.cmd, ipfamily.IPv4, backend)
	if err != nil {
		return err
	}
	sets, err := ipsets.New(ipsets.Options{Runner: f.cmd, Log: f.log})
	if err != nil {
		return err
	}
	f.writers = Writers{Filter: map[ipfamily.Family]*iptables.Table{}, NAT: map[ipfamily.Family]*iptables.Table{}, IPSets: sets, Routes: f.rt}
	for _, fam := range ipfamily.All {
		if fam == ipfamily.IPv6 {
			if reason := f.ipv6Unusable(ctx, backend); reason != "" {
				f.log.Info("IPv6 not programmed (no ip6tables filter or nat rules, no IPv6 sets)", "reason", reason)
				continue
			}
		}
		for _, name := range []string{"filter", nat.Table} {
			t, err := iptables.New(iptables.Options{Family: fam, Table: name, Backend: backend, Runner: f.cmd, Log: f.log})
			if err != nil {
				return err
			}
			if name == nat.Table {
				f.writers.NAT[fam] = t
			} else {
				f.writers.Filter[fam] = t
			}
			f.tables = append(f.tables, t)
		}
	}
	filter := make(map[ipfamily.Family]ChainWriter, len(f.writers.Filter))
	for fam, t := range f.writers.Filter {
		filter[fam] = t
	}
	pm := newPolicyManager(filter, sets)
	pm.counts = f.metrics.Policies
	pm.flowRules = f.flowRules
	f.flows = newFlowLogManager(f.cfg.NodeName, f.run, f.sysctl, f.metrics, f.flowRules, f.log)
	f.managers = append(f.managers, nat.New(f.writers.NAT, sets, nat.Options{RandomFully: feat.RandomFully, Log: f.log}), pm, f.flows)
	f.holdDeletes(f.cfg.WaitForInSync)
	f.log.Info("iptables writers", "backend", backend, "randomFully", feat.RandomFully, "tables", len(f.tables))
	return nil
}

// ipv6Unusable says why felix cannot program IPv6 here, or "".
func (f *Felix) ipv6Unusable(ctx context.Context, backend iptables.Backend) string {
	if _, err := iptables.DetectFeatures(ctx, f.cmd, ipfamily.IPv6, backend); err != nil {
		return err.Error()
	}
	// With ipv6.disable=1 every ip6tables-restore would fail, and felix would retry forever.
	err := f.run(func() error {
		_, err := os.Stat("/proc/sys/net/ipv6")
		return err
	})
	if err != nil {
		return fmt.Sprintf("IPv6 is disabled in the kernel: %v", err)
	}
	return ""
}

func (f *Felix) holdDeletes(hold bool) {
	for _, t := range f.tables {
		t.HoldDeletes(hold)
	}
	f.writers.IPSets.HoldDeletes(hold)
}

// applyWriters applies the iptables tables and the ipsets. After a failed write it waits for
// writeRetryAt (or a resync) rather than fail again on every event: the managers' state waits
// in the writers meanwhile.
func (f *Felix) applyWriters(ctx context.Context, resync bool, now time.Time) error {
	if resync {
		for _, t := range f.tables {
			t.QueueResync()
		}
		f.writers.IPSets.QueueResync()
	}
	if !f.writeRetryAt.IsZero() && now.Before(f.writeRetryAt) && !resync {
		return nil
	}
	f.writeRetryAt = time.Time{}
	err := f.write(ctx, resync)
	if err != nil {
		f.metrics.WriteErrors.Inc()
		f.writeRetryAt = now.Add(writeRetryInterval)
	}
	// Refused updates are a manager's bug, not the kernel's: they are reported at every pass
	// but retrying would not help.
	errs := []error{err}
	for _, t := range f.tables {
		if r := t.Refused(); r != nil {
			errs = append(errs, r)
		}
	}
	if r := f.writers.IPSets.Refused(); r != nil {
		errs = append(errs, r)
	}
	return errors.Join(errs...)
}

// write is one pass in the order the kernel needs: sets exist and are filled before any rule
// names them, and are destroyed only after the rules naming them are gone.
func (f *Felix) write(ctx context.Context, resync bool) error {
	var errs []error
	// On a resync the tables' kernel state is read while the sets are written: the two touch
	// different kernel objects, and the managers have finished changing the tables.
	read := make(chan struct{})
	go func() { defer close(read); iptables.ReadTogether(ctx, f.tables) }()
	if err := f.writers.IPSets.ApplyUpdates(ctx); err != nil {
		<-read
		// Rules naming a set that could not be made would fail anyway.
		return errors.Join(append(errs, err)...)
	}
	<-read
	tablesOK := true
	for _, t := range f.tables {
		if err := t.Apply(ctx); err != nil {
			errs = append(errs, err)
			tablesOK = false
		}
	}
	if tablesOK {
		if err := f.writers.IPSets.ApplyDeletions(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
