package vxlan

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// ErrUnsupported means the kernel has no vxlan driver.
var ErrUnsupported = errors.New("kernel has no vxlan support")

// DeviceSpec is what one of tabby's VXLAN devices should be.
type DeviceSpec struct {
	Name string
	VNI  int
	Port int
	// Local is this node's underlay address, the outer source; its family is the device's.
	Local netip.Addr
	MAC   model.MAC
	// Addr is the VTEP address, the device's only address of its family (a /32 or a /128).
	Addr netip.Addr
	// MTU; 0: Uplink's minus what VXLAN adds over the family's underlay.
	MTU    int
	Uplink string
	// TxChecksumOffload: the device leaves the inner packets' checksums to be completed later
	// (by the underlay device or the stack) rather than computing them as it sends.
	TxChecksumOffload bool
}

// Family is the device's (its underlay's) address family.
func (s DeviceSpec) Family() ipfamily.Family { return ipfamily.OfAddr(s.Local) }

// Overhead is what VXLAN adds to a packet over the family's underlay: outer IP, UDP, VXLAN and
// the inner Ethernet header.
func Overhead(f ipfamily.Family) int {
	if f == ipfamily.IPv6 {
		return v1.VXLANOverheadIPv6
	}
	return v1.VXLANOverhead
}

// Device makes the kernel's VXLAN devices match their specs.
type Device struct {
	h   nl.Handle
	log *slog.Logger
}

// NewDevice returns a device writer over h.
func NewDevice(h nl.Handle, log *slog.Logger) *Device {
	if log == nil {
		log = slog.Default()
	}
	return &Device{h: h, log: log}
}

// Applied is what Apply did and found.
type Applied struct {
	// Link is the device as it is now (nil: there is none).
	Link netlink.Link
	// Held says how the device differs from its spec in what only making it again changes
	// (VNI, port, local address), when mayDelete did not allow that; "" otherwise.
	Held string
}

// Apply makes the device match s. Without mayDelete it adds and changes but removes nothing:
// neither a device that must be made again to change nor an address it has besides the VTEP's.
func (d *Device) Apply(s DeviceSpec, mayDelete bool) (Applied, error) {
	link, err := d.lookup(s.Name)
	if err != nil {
		return Applied{}, err
	}
	var res Applied
	if link != nil {
		if why := differs(link, s); why != "" {
			if !mayDelete {
				return Applied{Link: link, Held: why}, nil
			}
			if err := d.h.LinkDel(link); err != nil && !nl.IsNotFound(err) {
				return Applied{Link: link}, fmt.Errorf("delete %s to make it again (%s): %w", s.Name, why, err)
			}
			d.log.Info("VXLAN device made again", "device", s.Name, "because", why)
			link = nil
		}
	}
	if link == nil {
		if link, err = d.create(s); err != nil {
			return res, err
		}
	}
	res.Link = link
	return res, d.fix(link, s, mayDelete)
}

func (d *Device) lookup(name string) (netlink.Link, error) {
	link, err := d.h.LinkByName(name)
	if err != nil {
		if nl.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("look up %s: %w", name, err)
	}
	return link, nil
}

// differs says what of s the existing link does not have and cannot be given in place.
func differs(link netlink.Link, s DeviceSpec) string {
	vx, ok := link.(*netlink.Vxlan)
	if !ok {
		return fmt.Sprintf("it is of type %s, not vxlan", link.Type())
	}
	local, _ := netip.AddrFromSlice(vx.SrcAddr)
	switch {
	case vx.VxlanId != s.VNI:
		return fmt.Sprintf("VNI %d, want %d", vx.VxlanId, s.VNI)
	case vx.Port != s.Port:
		return fmt.Sprintf("port %d, want %d", vx.Port, s.Port)
	case local.Unmap() != s.Local:
		return fmt.Sprintf("local address %s, want %s", local.Unmap(), s.Local)
	case vx.Learning:
		return "learning on"
	case vx.VtepDevIndex != 0 || vx.Group != nil || vx.FlowBased:
		return "a lower device, group or external control set"
	}
	return ""
}

func (d *Device) create(s DeviceSpec) (netlink.Link, error) {
	mtu, err := d.mtu(s)
	if err != nil {
		return nil, err
	}
	vx := &netlink.Vxlan{
		LinkAttrs: netlink.LinkAttrs{Name: s.Name, MTU: mtu, HardwareAddr: s.MAC.HardwareAddr()},
		VxlanId:   s.VNI, Port: s.Port, SrcAddr: net.IP(s.Local.AsSlice()), Learning: false,
	}
	err = d.h.LinkAdd(vx)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT):
		return nil, fmt.Errorf("create %s: %w (%v)", s.Name, ErrUnsupported, err)
	case err != nil && !errors.Is(err, unix.EEXIST):
		return nil, fmt.Errorf("create %s (VNI %d, port %d, local %s): %w", s.Name, s.VNI, s.Port, s.Local, err)
	}
	link, err := d.h.LinkByName(s.Name)
	if err != nil {
		return nil, fmt.Errorf("look up %s after creating it: %w", s.Name, err)
	}
	d.log.Info("created VXLAN device", "device", s.Name, "vni", s.VNI, "port", s.Port, "local", s.Local, "mac", s.MAC, "mtu", mtu)
	return link, nil
}

func (d *Device) mtu(s DeviceSpec) (int, error) {
	if s.MTU != 0 {
		return s.MTU, nil
	}
	up, err := d.h.LinkByName(s.Uplink)
	if err != nil {
		return 0, fmt.Errorf("uplink %q for the MTU of %s: %w", s.Uplink, s.Name, err)
	}
	return up.Attrs().MTU - Overhead(s.Family()), nil
}

// fix gives an existing device what can change in place: MAC, MTU, checksum offload, up, and
// the VTEP address.
func (d *Device) fix(link netlink.Link, s DeviceSpec, mayDelete bool) error {
	if mac := s.MAC.HardwareAddr(); !bytes.Equal(link.Attrs().HardwareAddr, mac) {
		if err := d.h.LinkSetHardwareAddr(link, mac); err != nil {
			return fmt.Errorf("set %s address %s: %w", s.Name, s.MAC, err)
		}
	}
	mtu, err := d.mtu(s)
	if err != nil {
		return err
	}
	if link.Attrs().MTU != mtu {
		if err := d.h.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("set %s mtu %d: %w", s.Name, mtu, err)
		}
	}
	on, err := d.h.TxChecksumOffload(s.Name)
	if err != nil {
		return err
	}
	if on != s.TxChecksumOffload {
		if err := d.h.SetTxChecksumOffload(s.Name, s.TxChecksumOffload); err != nil {
			return err
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := d.h.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", s.Name, err)
		}
	}
	return d.setAddr(link, s, mayDelete)
}

// setAddr leaves the VTEP address as the device's only address of its family (an IPv6 device
// keeps its link-local one).
func (d *Device) setAddr(link netlink.Link, s DeviceSpec, mayDelete bool) error {
	fam := unix.AF_INET
	if s.Family() == ipfamily.IPv6 {
		fam = unix.AF_INET6
	}
	cur, err := d.h.AddrList(link, fam)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", s.Name, err)
	}
	want := netip.PrefixFrom(s.Addr, s.Addr.BitLen())
	have := false
	for _, a := range cur {
		got, _ := netip.AddrFromSlice(a.IP)
		got = got.Unmap()
		ones, _ := a.Mask.Size()
		switch {
		case netip.PrefixFrom(got, ones) == want:
			have = true
		case got.IsLinkLocalUnicast() || !mayDelete:
		default:
			if err := d.h.AddrDel(link, &a); err != nil && !nl.IsNotFound(err) {
				return fmt.Errorf("remove address %s from %s: %w", a.IPNet, s.Name, err)
			}
		}
	}
	if have {
		return nil
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(s.Addr.AsSlice()), Mask: net.CIDRMask(want.Bits(), want.Bits())}}
	if s.Family() == ipfamily.IPv6 {
		a.Flags = unix.IFA_F_NODAD // the VTEP is unique by IPAM: usable at once
	}
	if err := d.h.AddrReplace(link, a); err != nil {
		return fmt.Errorf("add address %s to %s: %w", want, s.Name, err)
	}
	return nil
}

// Remove deletes the device named name, if there is one.
func (d *Device) Remove(name string) error {
	link, err := d.lookup(name)
	if err != nil || link == nil {
		return err
	}
	if err := d.h.LinkDel(link); err != nil && !nl.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	d.log.Info("deleted VXLAN device: no VXLAN pool of its family, or this node has no VTEP of it", "device", name)
	return nil
}
