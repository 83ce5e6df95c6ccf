package tunnel

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/routetable"
)

// Options configure the manager.
type Options struct {
	// NodeName is this node: its NodeUpdate carries tunl0's address.
	NodeName string
	// MTU for tunl0; 0 = Uplink's MTU - 20.
	MTU int
	// Uplink is the interface holding the node's IPv4 BGP address, the one IPIP leaves by.
	Uplink string
	// WaitForInSync leaves tunl0 alone until model.InSync: before, the tunnel address and the
	// pools may not be known yet, and taking tunl0 out of use would cut the traffic it carries.
	WaitForInSync bool
	// LinkReady, when set, is told tunl0 after each apply: the route table learns its index at
	// once and programs the routes through it in the same pass.
	LinkReady func(netlink.Link)
	// Errors, when set, counts failed applies.
	Errors prometheus.Counter
	Log    *slog.Logger
}

// Manager is felix's IPIP manager: it takes PoolUpdate/PoolRemove (does a pool use IPIP?),
// this node's NodeUpdate/NodeRemove (tunl0's address), routetable.LinkUpdate (tunl0 or its
// uplink changed) and model.InSync, and brings tunl0 in line when what it should be changed, a
// link event touched it, or the kernel was read again: a learned route, on every node for
// every block of the cluster, costs it nothing.
type Manager struct {
	dev  *Device
	opts Options

	ipipPools map[string]struct{}
	addr      netip.Addr
	inSync    bool
	dirty     bool
	applied   *Desired // what tunl0 was last brought to; nil: apply it again
	lastErr   string
}

// NewManager returns a manager applying through dev.
func NewManager(dev *Device, o Options) *Manager {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Manager{dev: dev, opts: o, ipipPools: map[string]struct{}{}, inSync: !o.WaitForInSync, dirty: true}
}

// OnUpdate records what tunl0 depends on; other messages are ignored.
func (m *Manager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case model.PoolUpdate:
		if calc.UsesIPIP(u.Pool) {
			m.ipipPools[u.Pool.Name] = struct{}{}
		} else {
			delete(m.ipipPools, u.Pool.Name)
		}
	case model.PoolRemove:
		delete(m.ipipPools, u.Name)
	case model.NodeUpdate:
		if u.Node.Name == m.opts.NodeName {
			m.addr = u.Node.IPIPTunnelAddr
		}
	case model.NodeRemove:
		if u.Name == m.opts.NodeName {
			m.addr = netip.Addr{}
		}
	case routetable.LinkUpdate:
		if u.Name == calc.TunnelDevice || u.Name != "" && u.Name == m.opts.Uplink {
			m.dirty = true
		}
	case model.InSync:
		if !m.inSync {
			m.inSync, m.dirty = true, true
		}
	}
}

// CompleteDeferredWork applies tunl0 when needed. A failure is retried at every pass.
func (m *Manager) CompleteDeferredWork(_ context.Context, resync bool) error {
	if !m.inSync {
		return nil
	}
	want := Desired{Needed: len(m.ipipPools) > 0, Addr: m.addr, MTU: m.opts.MTU, Uplink: m.opts.Uplink}
	if !resync && !m.dirty && m.applied != nil && *m.applied == want {
		return nil
	}
	m.applied = nil
	link, err := m.dev.Apply(want)
	if link != nil && m.opts.LinkReady != nil {
		m.opts.LinkReady(link)
	}
	m.dirty = err != nil
	if err != nil {
		if m.opts.Errors != nil {
			m.opts.Errors.Inc()
		}
		if msg := err.Error(); msg != m.lastErr {
			m.opts.Log.Error("tunnel device not usable: IPIP routes stay unprogrammed", "device", calc.TunnelDevice, "error", err)
			m.lastErr = msg
		}
		return err
	}
	m.lastErr = ""
	m.applied = &want
	return nil
}
