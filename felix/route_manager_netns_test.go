package felix_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/testwait"
)

// deviceRoute is the message of a route-producing manager felix does not have: send prefix
// straight out of dev (empty: withdraw it).
type deviceRoute struct {
	prefix netip.Prefix
	dev    string
}

// classDevice places the device routes below the local blackholes and VXLAN, and above what BGP
// learns.
const classDevice routetable.Class = 27

// deviceRouteManager is that manager, written against felix's interfaces only.
type deviceRouteManager struct {
	rt    routetable.Writer
	want  map[netip.Prefix]string
	dirty map[netip.Prefix]struct{}
}

func newDeviceRouteManager(w felix.Writers) felix.Manager {
	return &deviceRouteManager{rt: w.Routes, want: map[netip.Prefix]string{}, dirty: map[netip.Prefix]struct{}{}}
}

func (m *deviceRouteManager) OnUpdate(msg any) {
	if u, ok := msg.(deviceRoute); ok {
		m.want[u.prefix] = u.dev
		m.dirty[u.prefix] = struct{}{}
	}
}

func (m *deviceRouteManager) CompleteDeferredWork(context.Context, bool) error {
	for p := range m.dirty {
		if dev := m.want[p]; dev != "" {
			m.rt.SetRoute(classDevice, calc.Route{Dst: p, Kind: calc.KindRemote, Dev: dev})
		} else {
			m.rt.RemoveRoute(classDevice, p)
		}
	}
	clear(m.dirty)
	return nil
}

// A manager felix does not have is added beside its own, with no change to them or to what
// feeds felix: its routes reach the kernel through the shared route table, and where a pod's
// route wants the same prefix, the pod's wins until the pod goes.
func TestAddedRouteManager(t *testing.T) {
	requireRoot(t)
	l := newNodeLab(t)
	l.start(t, felix.Config{ResyncInterval: time.Hour}, newDeviceRouteManager)
	f, node := l.f, l.node
	up0 := node.link(t, "up0").Attrs().Index
	cali := node.link(t, podVeth).Attrs().Index
	send(f,
		thisNode("198.51.100.11/24", "", ""),
		pool("default", "10.244.0.0/16", v1.IPIPModeNever, false),
		workload(podVeth, podIP),
		deviceRoute{prefix: netip.MustParsePrefix("203.0.113.128/25"), dev: "up0"},
		deviceRoute{prefix: netip.MustParsePrefix(podIP + "/32"), dev: "up0"},
	)
	testwait.Until(t, "the added manager's route, and the pod's over its own", 5*time.Second, func() bool {
		r, ok := node.route("203.0.113.128/25")
		w, okw := node.route(podIP + "/32")
		return ok && r.LinkIndex == up0 && r.Protocol == v1.RouteProtocol && r.Scope == netlink.SCOPE_LINK &&
			okw && w.LinkIndex == cali
	})

	send(f, model.WorkloadRemove{Interface: podVeth})
	testwait.Until(t, "the added manager's route once the pod is gone", 5*time.Second, func() bool {
		r, ok := node.route(podIP + "/32")
		return ok && r.LinkIndex == up0 && r.Protocol == v1.RouteProtocol
	})

	send(f, deviceRoute{prefix: netip.MustParsePrefix("203.0.113.128/25")}, deviceRoute{prefix: netip.MustParsePrefix(podIP + "/32")})
	testwait.Until(t, "its routes gone once it withdraws them", 5*time.Second, func() bool {
		_, a := node.route("203.0.113.128/25")
		_, b := node.route(podIP + "/32")
		return !a && !b
	})
}
