package tunnel

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/nl"
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
