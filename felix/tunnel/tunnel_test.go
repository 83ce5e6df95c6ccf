package tunnel

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/routetable"
)

func TestTunnelLifecycle(t *testing.T) {
	f := nl.NewFake()
	f.AddLink("eth0", 1400)
	m := NewDevice(f, nil, nil)
	if l, err := m.Apply(Desired{Needed: false, Uplink: "eth0"}); err != nil || l != nil {
		t.Fatalf("not needed, absent: %v %v", l, err)
	}
	d := Desired{Needed: true, Addr: netip.MustParseAddr("10.244.9.1"), Uplink: "eth0"}
	l, err := m.Apply(d)
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().MTU != 1380 || l.Attrs().Flags&net.FlagUp == 0 || l.Type() != "ipip" {
		t.Fatalf("tunl0 %+v type %s", l.Attrs(), l.Type())
	}
	addrs, _ := f.AddrList(l, unix.AF_INET)
	if len(addrs) != 1 || addrs[0].IPNet.String() != "10.244.9.1/32" {
		t.Fatalf("addrs %v", addrs)
	}
	// The tunnel address moves: the old one goes.
	d.Addr = netip.MustParseAddr("10.244.9.2")
	d.MTU = 1300
	if _, err := m.Apply(d); err != nil {
		t.Fatal(err)
	}
	addrs, _ = f.AddrList(l, unix.AF_INET)
	if len(addrs) != 1 || addrs[0].IPNet.String() != "10.244.9.2/32" || l.Attrs().MTU != 1300 {
		t.Fatalf("addrs %v mtu %d", addrs, l.Attrs().MTU)
	}
	if f.Calls("LinkAdd") != 1 {
		t.Fatalf("LinkAdd called %d times", f.Calls("LinkAdd"))
	}
	// No pool needs IPIP any more: out of use.
	if _, err := m.Apply(Desired{Needed: false}); err != nil {
		t.Fatal(err)
	}
	if addrs, _ = f.AddrList(l, unix.AF_INET); len(addrs) != 0 {
		t.Fatalf("address kept: %v", addrs)
	}
}

func TestTunnelUnsupportedKernel(t *testing.T) {
	f := nl.NewFake()
	f.AddLink("eth0", 1400)
	f.LinkAddErr = unix.EOPNOTSUPP
	_, err := NewDevice(f, nil, nil).Apply(Desired{Needed: true, Addr: netip.MustParseAddr("10.244.9.1"), Uplink: "eth0"})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
}

func TestTunnelTransientFailure(t *testing.T) {
	f := nl.NewFake()
	f.AddLink("eth0", 1400)
	f.Fail(&nl.Failure{Op: "AddrReplace", Err: unix.ENOBUFS, Times: 1})
	m := NewDevice(f, nil, nil)
	d := Desired{Needed: true, Addr: netip.MustParseAddr("10.244.9.1"), Uplink: "eth0"}
	if _, err := m.Apply(d); err == nil {
		t.Fatal("injected failure not reported")
	}
	l, err := m.Apply(d)
	if err != nil {
		t.Fatal(err)
	}
	if addrs, _ := f.AddrList(l, unix.AF_INET); len(addrs) != 1 {
		t.Fatalf("retry did not add the address: %v", addrs)
	}
}

// The manager leaves tunl0 alone until in sync, then follows the pools and the node's tunnel
// address, looking at the device again only when one of them, a link event on it or its
// uplink, or a resync says so.
func TestManager(t *testing.T) {
	f := nl.NewFake()
	f.AddLink("eth0", 1400)
	var ready []string
	m := NewManager(NewDevice(f, nil, nil), Options{NodeName: "n1", Uplink: "eth0", WaitForInSync: true,
		LinkReady: func(l netlink.Link) { ready = append(ready, l.Attrs().Name) }})
	ctx := context.Background()
	pass := func(what string, resync bool, msgs ...any) {
		t.Helper()
		for _, msg := range msgs {
			m.OnUpdate(msg)
		}
		if err := m.CompleteDeferredWork(ctx, resync); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	node := model.Node{Name: "n1", IPIPTunnelAddr: netip.MustParseAddr("10.244.9.1")}
	ipip := model.Pool{Name: "ipip", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeCrossSubnet}
	pass("before in sync", true, model.NodeUpdate{Node: node}, model.PoolUpdate{Pool: ipip})
	if f.Calls("LinkByName") != 0 {
		t.Fatal("tunl0 looked at before in sync")
	}
	pass("in sync", false, model.InSync{})
	l, err := f.LinkByName("tunl0")
	if err != nil {
		t.Fatal(err)
	}
	if addrs, _ := f.AddrList(l, unix.AF_INET); len(addrs) != 1 || addrs[0].IPNet.String() != "10.244.9.1/32" || len(ready) != 1 {
		t.Fatalf("tunl0 addresses %v, link ready told %v", addrs, ready)
	}
	looks := f.Calls("LinkByName")
	pass("unrelated changes", false,
		model.NodeUpdate{Node: model.Node{Name: "n2", IPIPTunnelAddr: netip.MustParseAddr("10.244.8.1")}},
		model.PoolUpdate{Pool: model.Pool{Name: "v6", CIDR: netip.MustParsePrefix("fd00:10:244::/48"), IPIPMode: v1.IPIPModeAlways}},
		model.RouteUpdate{Prefix: netip.MustParsePrefix("10.244.1.0/26"), NextHop: netip.MustParseAddr("198.51.100.12")},
		routetable.LinkUpdate{Name: "cali1", Index: 9})
	if f.Calls("LinkByName") != looks {
		t.Fatal("tunl0 looked at for changes that do not concern it")
	}
	pass("a link event on the uplink", false, routetable.LinkUpdate{Name: "eth0", Index: 1})
	if f.Calls("LinkByName") == looks {
		t.Fatal("tunl0 not looked at after its uplink changed")
	}
	pass("the last IPIP pool gone", false, model.PoolRemove{Name: "ipip"})
	if addrs, _ := f.AddrList(l, unix.AF_INET); len(addrs) != 0 {
		t.Fatalf("tunl0 keeps %v without an IPIP pool", addrs)
	}
}
