// Package tunnel keeps the IPIP device tunl0 as felix wants it: present, up, the node's tunnel
// address as its only address and an MTU 20 bytes under the uplink's while a pool uses IPIP;
// without address when none does. Manager decides from the model's changes; Device makes the
// kernel's tunl0 match.
package tunnel

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/sysctl"
)

// IPIPOverhead is the outer IPv4 header IPIP adds.
const IPIPOverhead = 20

// ErrUnsupported means the kernel has no ipip driver ("Unknown device type").
var ErrUnsupported = errors.New("kernel has no ipip support")

// Desired is what tunl0 should be.
type Desired struct {
	Needed bool
	Addr   netip.Addr // the node's tunnel address; invalid = none allocated yet
	// MTU for tunl0; 0 = uplink MTU - 20.
	MTU    int
	Uplink string
}

// Device applies Desired to tunl0.
type Device struct {
	h      nl.Handle
	sysctl *sysctl.Writer
	log    *slog.Logger
}

// NewDevice returns a device writing through h and sc (nil: tunl0's sysctls are not written).
func NewDevice(h nl.Handle, sc *sysctl.Writer, log *slog.Logger) *Device {
	if log == nil {
		log = slog.Default()
	}
	return &Device{h: h, sysctl: sc, log: log}
}

// Apply makes tunl0 match d. It returns the link when one exists (so the route table learns
// its index at once).
func (m *Device) Apply(d Desired) (netlink.Link, error) {
	link, err := m.h.LinkByName(calc.TunnelDevice)
	if err != nil && !nl.IsNotFound(err) {
		return nil, fmt.Errorf("look up %s: %w", calc.TunnelDevice, err)
	}
	if !d.Needed {
		if link == nil {
			return nil, nil
		}
		// The fallback tunl0 of the ipip module cannot be deleted: take it out of use.
		return link, m.setAddrs(link, netip.Addr{})
	}
	if link == nil {
		err := m.h.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: calc.TunnelDevice}})
		switch {
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOENT):
			return nil, fmt.Errorf("create %s: %w (%v)", calc.TunnelDevice, ErrUnsupported, err)
		case err != nil && !errors.Is(err, unix.EEXIST):
			return nil, fmt.Errorf("create %s: %w", calc.TunnelDevice, err)
		}
		if link, err = m.h.LinkByName(calc.TunnelDevice); err != nil {
			return nil, fmt.Errorf("look up %s after creating it: %w", calc.TunnelDevice, err)
		}
		m.log.Info("created IPIP tunnel device", "name", calc.TunnelDevice)
	}
	mtu := d.MTU
	if mtu == 0 {
		up, err := m.h.LinkByName(d.Uplink)
		if err != nil {
			return link, fmt.Errorf("uplink %q for the tunnel MTU: %w", d.Uplink, err)
		}
		mtu = up.Attrs().MTU - IPIPOverhead
	}
	if link.Attrs().MTU != mtu {
		if err := m.h.LinkSetMTU(link, mtu); err != nil {
			return link, fmt.Errorf("set %s mtu %d: %w", calc.TunnelDevice, mtu, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := m.h.LinkSetUp(link); err != nil {
			return link, fmt.Errorf("set %s up: %w", calc.TunnelDevice, err)
		}
	}
	if m.sysctl != nil {
		if err := m.sysctl.Set(sysctl.TunnelInterface(calc.TunnelDevice)...); err != nil {
			return link, err
		}
	}
	return link, m.setAddrs(link, d.Addr)
}

// setAddrs leaves addr/32 as the only IPv4 address of the link (none when addr is invalid).
func (m *Device) setAddrs(link netlink.Link, addr netip.Addr) error {
	cur, err := m.h.AddrList(link, unix.AF_INET)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", calc.TunnelDevice, err)
	}
	have := false
	for _, a := range cur {
		got, _ := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if addr.IsValid() && got.Unmap() == addr && ones == 32 {
			have = true
			continue
		}
		if err := m.h.AddrDel(link, &a); err != nil && !nl.IsNotFound(err) {
			return fmt.Errorf("remove address %s from %s: %w", a.IPNet, calc.TunnelDevice, err)
		}
	}
	if addr.IsValid() && !have {
		b := addr.As4()
		a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(b[:]), Mask: net.CIDRMask(32, 32)}}
		if err := m.h.AddrReplace(link, a); err != nil {
			return fmt.Errorf("add address %s to %s: %w", addr, calc.TunnelDevice, err)
		}
	}
	return nil
}
