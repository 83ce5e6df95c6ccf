package sysctl

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Setter writes settings; *Writer is the real one.
type Setter interface {
	Set(settings ...Setting) error
}

// ManagerOptions configure the manager.
type ManagerOptions struct {
	// IsWorkloadInterface tells workload veths (cali*) apart.
	IsWorkloadInterface func(name string) bool
	// Errors, when set, counts failed writes.
	Errors prometheus.Counter
}

// Manager is felix's sysctl manager: IPv4 forwarding, and IPv6 forwarding once an IPv6 pool
// exists (PoolUpdate/PoolRemove), at once and at every resync; each workload veth's settings
// when it appears (routetable.LinkUpdate) and at every resync (routetable.LinksResync).
type Manager struct {
	s    Setter
	opts ManagerOptions

	pools      map[string]ipfamily.Family
	forwarding map[ipfamily.Family]bool // forwarding was set (or tried: again at the next resync)
	// done holds the veths set, with the index they had then (a veth of the same name made
	// again is set again); pending those to set.
	done, pending map[string]int
}

// NewManager returns a manager writing through s.
func NewManager(s Setter, o ManagerOptions) *Manager {
	if o.IsWorkloadInterface == nil {
		o.IsWorkloadInterface = func(string) bool { return false }
	}
	return &Manager{s: s, opts: o, pools: map[string]ipfamily.Family{}, forwarding: map[ipfamily.Family]bool{}, done: map[string]int{}, pending: map[string]int{}}
}

// OnUpdate records pools and workload veths; other messages are ignored.
func (m *Manager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case model.PoolUpdate:
		m.pools[u.Pool.Name] = u.Pool.Family()
	case model.PoolRemove:
		delete(m.pools, u.Name)
	case routetable.LinkUpdate:
		switch {
		case u.Gone:
			delete(m.done, u.Name)
			delete(m.pending, u.Name)
		case m.opts.IsWorkloadInterface(u.Name) && m.done[u.Name] != u.Index:
			m.pending[u.Name] = u.Index
		}
	case routetable.LinksResync:
		clear(m.pending)
		for name, idx := range u.Links {
			if m.opts.IsWorkloadInterface(name) {
				m.pending[name] = idx
			}
		}
	}
}

// routes tells whether this node routes fam's pod traffic. IPv6 only once an IPv6 pool exists,
// as Calico does with IPv6 off: turning its forwarding on makes the kernel ignore router
// advertisements on interfaces that only accept them when not forwarding, which an IPv4-only
// node may rely on.
func (m *Manager) routes(fam ipfamily.Family) bool {
	if fam == ipfamily.IPv4 {
		return true
	}
	for _, f := range m.pools {
		if f == fam {
			return true
		}
	}
	return false
}

// CompleteDeferredWork writes what is due. What failed (a veth may be gone already) is tried
// again at the next resync.
func (m *Manager) CompleteDeferredWork(_ context.Context, resync bool) error {
	var errs []error
	fail := func(err error) {
		if m.opts.Errors != nil {
			m.opts.Errors.Inc()
		}
		errs = append(errs, err)
	}
	for _, fam := range ipfamily.All {
		if !m.routes(fam) || m.forwarding[fam] && !resync {
			continue
		}
		if err := m.s.Set(Forwarding(fam)...); err != nil {
			fail(err)
		}
		m.forwarding[fam] = true
	}
	if len(m.pending) == 0 {
		// A map keeps the size it once had: this pass must not cost every veth of the resync.
		return errors.Join(errs...)
	}
	for name, idx := range m.pending {
		if err := m.s.Set(WorkloadInterface(name)...); err != nil {
			fail(err)
		} else {
			m.done[name] = idx
		}
	}
	clear(m.pending)
	return errors.Join(errs...)
}
