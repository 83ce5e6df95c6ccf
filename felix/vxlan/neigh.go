package vxlan

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/internal/dirtyset"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// peerTable holds one VXLAN device's peers, as the route table holds routes: the desired
// neighbour entries (each peer's VTEP address → its MAC) and FDB entries (its MAC → its underlay
// address), made to match a cache of the device's entries in the kernel, kept current by
// netlink events and read again on a resync or when the device is made. Every permanent
// neighbour entry and every FDB entry on the device is tabby's; the kernel's own neighbour
// entries (multicast, an address someone pinged) are left alone.
type peerTable struct {
	h     nl.Handle
	fam   ipfamily.Family
	dev   string
	index int // the device's; 0: none, nothing is written

	peers  map[model.MAC]calc.VTEP // desired, by MAC; one per VTEP address too (PeerConflict)
	byAddr map[netip.Addr]model.MAC

	neigh map[netip.Addr]kneigh
	fdb   map[model.MAC][]kfdb

	dirtyAddrs dirtyset.Set[netip.Addr]
	dirtyMACs  dirtyset.Set[model.MAC]
	resync     bool
	// failed are the entries whose last write failed, with the error; the next apply tries them
	// again.
	failedAddrs map[netip.Addr]error
	failedMACs  map[model.MAC]error
}

type kneigh struct {
	mac       model.MAC
	permanent bool
}

type kfdb struct {
	dst       netip.Addr
	permanent bool
}

func newPeerTable(h nl.Handle, fam ipfamily.Family) *peerTable {
	return &peerTable{
		h: h, fam: fam, dev: calc.VXLANDevice(fam),
		peers: map[model.MAC]calc.VTEP{}, byAddr: map[netip.Addr]model.MAC{},
		neigh: map[netip.Addr]kneigh{}, fdb: map[model.MAC][]kfdb{},
		failedAddrs: map[netip.Addr]error{}, failedMACs: map[model.MAC]error{},
	}
}

// set makes v a peer.
func (t *peerTable) set(v calc.VTEP) {
	t.peers[v.MAC], t.byAddr[v.Addr] = v, v.MAC
	t.dirtyAddrs.Add(v.Addr)
	t.dirtyMACs.Add(v.MAC)
}

// remove withdraws v.
func (t *peerTable) remove(v calc.VTEP) {
	if cur, ok := t.peers[v.MAC]; ok && cur == v {
		delete(t.peers, v.MAC)
	}
	if mac, ok := t.byAddr[v.Addr]; ok && mac == v.MAC {
		delete(t.byAddr, v.Addr)
	}
	t.dirtyAddrs.Add(v.Addr)
	t.dirtyMACs.Add(v.MAC)
}

// setLink binds the table to the device's index (0: none). A new index is a new device: what
// the kernel holds is read again.
func (t *peerTable) setLink(index int) {
	if index == t.index {
		return
	}
	t.index = index
	clear(t.neigh)
	clear(t.fdb)
	clear(t.failedAddrs)
	clear(t.failedMACs)
	t.resync = index != 0
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func macOf(hw net.HardwareAddr) (model.MAC, bool) {
	if len(hw) != 6 {
		return model.MAC{}, false
	}
	return model.MAC(hw), true
}

// onEvent keeps the cache current; it tells whether the change needs a write (someone removed
// or changed one of tabby's entries, or added one on its device).
func (t *peerTable) onEvent(u netlink.NeighUpdate) bool {
	if t.index == 0 || u.LinkIndex != t.index {
		return false
	}
	gone := u.Type == unix.RTM_DELNEIGH
	permanent := u.State&netlink.NUD_PERMANENT != 0
	if u.Family == unix.AF_BRIDGE {
		mac, ok := macOf(u.HardwareAddr)
		if !ok {
			return false
		}
		dst := addrOf(u.IP)
		list := t.fdb[mac]
		i := indexFDB(list, dst)
		switch {
		case gone && i < 0:
			return false
		case gone:
			list = append(list[:i:i], list[i+1:]...)
		case i >= 0 && list[i].permanent == permanent:
			return false
		case i >= 0:
			list[i].permanent = permanent
		default:
			list = append(list, kfdb{dst: dst, permanent: permanent})
		}
		if len(list) == 0 {
			delete(t.fdb, mac)
		} else {
			t.fdb[mac] = list
		}
		if t.fdbOK(mac) {
			return false
		}
		t.dirtyMACs.Add(mac)
		return true
	}
	addr := addrOf(u.IP)
	if ipfamily.OfAddr(addr) != t.fam {
		return false
	}
	old, had := t.neigh[addr]
	if gone {
		if !had {
			return false
		}
		delete(t.neigh, addr)
	} else {
		mac, _ := macOf(u.HardwareAddr)
		cur := kneigh{mac: mac, permanent: permanent}
		if had && old == cur {
			return false
		}
		t.neigh[addr] = cur
	}
	if t.neighOK(addr) {
		return false
	}
	t.dirtyAddrs.Add(addr)
	return true
}

func indexFDB(list []kfdb, dst netip.Addr) int {
	for i, e := range list {
		if e.dst == dst {
			return i
		}
	}
	return -1
}

// neighOK tells whether the kernel's neighbour entry at addr is as wanted (absent or not
// tabby's, when no peer has addr).
func (t *peerTable) neighOK(addr netip.Addr) bool {
	k, had := t.neigh[addr]
	mac, want := t.byAddr[addr]
	if !want {
		return !had || !k.permanent
	}
	return had && k.permanent && k.mac == mac
}

// fdbOK tells whether the kernel's FDB entries of mac are as wanted: the peer's underlay
// address alone, or none.
func (t *peerTable) fdbOK(mac model.MAC) bool {
	list := t.fdb[mac]
	p, want := t.peers[mac]
	if !want {
		return len(list) == 0
	}
	return len(list) == 1 && list[0].permanent && list[0].dst == p.Underlay
}

// read replaces the cache with the device's entries in the kernel and marks every entry, desired
// or present, to be looked at.
func (t *peerTable) read() error {
	af := unix.AF_INET
	if t.fam == ipfamily.IPv6 {
		af = unix.AF_INET6
	}
	ns, err := t.h.NeighList(t.index, af)
	if err != nil {
		return fmt.Errorf("list neighbours of %s: %w", t.dev, err)
	}
	fdb, err := t.h.NeighList(t.index, unix.AF_BRIDGE)
	if err != nil {
		return fmt.Errorf("list FDB entries of %s: %w", t.dev, err)
	}
	clear(t.neigh)
	clear(t.fdb)
	for _, n := range ns {
		addr := addrOf(n.IP)
		if n.LinkIndex != t.index || ipfamily.OfAddr(addr) != t.fam {
			continue
		}
		mac, _ := macOf(n.HardwareAddr)
		t.neigh[addr] = kneigh{mac: mac, permanent: n.State&netlink.NUD_PERMANENT != 0}
		t.dirtyAddrs.Add(addr)
	}
	for _, n := range fdb {
		mac, ok := macOf(n.HardwareAddr)
		if n.LinkIndex != t.index || !ok {
			continue
		}
		t.fdb[mac] = append(t.fdb[mac], kfdb{dst: addrOf(n.IP), permanent: n.State&netlink.NUD_PERMANENT != 0})
		t.dirtyMACs.Add(mac)
	}
	for addr := range t.byAddr {
		t.dirtyAddrs.Add(addr)
	}
	for mac := range t.peers {
		t.dirtyMACs.Add(mac)
	}
	return nil
}

// apply writes the differences of the marked entries. Without mayDelete it removes nothing.
func (t *peerTable) apply(mayDelete bool) error {
	if t.index == 0 {
		return nil
	}
	if t.resync {
		if err := t.read(); err != nil {
			return err
		}
		t.resync = false
	}
	for addr := range t.failedAddrs {
		t.dirtyAddrs.Add(addr)
	}
	for mac := range t.failedMACs {
		t.dirtyMACs.Add(mac)
	}
	for _, addr := range t.dirtyAddrs.Keys() {
		delete(t.failedAddrs, addr)
		if !t.neighOK(addr) {
			if err := t.writeNeigh(addr, mayDelete); err != nil {
				t.failedAddrs[addr] = err
			}
		}
	}
	t.dirtyAddrs.Clear()
	for _, mac := range t.dirtyMACs.Keys() {
		delete(t.failedMACs, mac)
		if !t.fdbOK(mac) {
			if err := t.writeFDB(mac, mayDelete); err != nil {
				t.failedMACs[mac] = err
			}
		}
	}
	t.dirtyMACs.Clear()
	var errs []error
	for addr, err := range t.failedAddrs {
		errs = append(errs, fmt.Errorf("neighbour %s on %s: %w", addr, t.dev, err))
		if len(errs) == 3 {
			break
		}
	}
	for mac, err := range t.failedMACs {
		errs = append(errs, fmt.Errorf("FDB entry %s on %s: %w", mac, t.dev, err))
		if len(errs) == 6 {
			break
		}
	}
	if n := len(t.failedAddrs) + len(t.failedMACs); n > 0 {
		return fmt.Errorf("%d neighbour and FDB entries not programmed: %w", n, errors.Join(errs...))
	}
	return nil
}

func (t *peerTable) family() int {
	if t.fam == ipfamily.IPv6 {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func (t *peerTable) writeNeigh(addr netip.Addr, mayDelete bool) error {
	n := &netlink.Neigh{LinkIndex: t.index, Family: t.family(), IP: net.IP(addr.AsSlice())}
	mac, want := t.byAddr[addr]
	if !want {
		if !mayDelete {
			return nil
		}
		if err := t.h.NeighDel(n); err != nil && !nl.IsNotFound(err) {
			return fmt.Errorf("delete: %w", err)
		}
		delete(t.neigh, addr)
		return nil
	}
	n.State, n.HardwareAddr = netlink.NUD_PERMANENT, mac.HardwareAddr()
	if err := t.h.NeighSet(n); err != nil {
		return fmt.Errorf("replace with %s permanent: %w", mac, err)
	}
	t.neigh[addr] = kneigh{mac: mac, permanent: true}
	return nil
}

func (t *peerTable) writeFDB(mac model.MAC, mayDelete bool) error {
	p, want := t.peers[mac]
	if mayDelete {
		// A destination besides the wanted one (someone appended it) goes first: replacing
		// the entry changes only one of its destinations.
		for _, e := range t.fdb[mac] {
			if want && e.dst == p.Underlay {
				continue
			}
			del := &netlink.Neigh{LinkIndex: t.index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF, HardwareAddr: mac.HardwareAddr()}
			if e.dst.IsValid() {
				del.IP = net.IP(e.dst.AsSlice())
			}
			if err := t.h.NeighDel(del); err != nil && !nl.IsNotFound(err) {
				return fmt.Errorf("delete destination %s: %w", e.dst, err)
			}
			list := t.fdb[mac]
			if i := indexFDB(list, e.dst); i >= 0 {
				list = append(list[:i:i], list[i+1:]...)
			}
			if len(list) == 0 {
				delete(t.fdb, mac)
			} else {
				t.fdb[mac] = list
			}
		}
	}
	if !want {
		return nil
	}
	n := &netlink.Neigh{
		LinkIndex: t.index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF, State: netlink.NUD_PERMANENT,
		IP: net.IP(p.Underlay.AsSlice()), HardwareAddr: mac.HardwareAddr(),
	}
	if err := t.h.NeighSet(n); err != nil {
		return fmt.Errorf("replace with destination %s permanent: %w", p.Underlay, err)
	}
	list := t.fdb[mac]
	if i := indexFDB(list, p.Underlay); i >= 0 {
		list[i].permanent = true
	} else if len(list) > 0 {
		list[0] = kfdb{dst: p.Underlay, permanent: true} // the kernel replaced its first
	} else {
		t.fdb[mac] = []kfdb{{dst: p.Underlay, permanent: true}}
	}
	return nil
}

// programmed counts the peers whose neighbour and FDB entries are both in place.
func (t *peerTable) programmed() int {
	if t.index == 0 {
		return 0
	}
	bad := 0
	for mac := range t.failedMACs {
		if _, ok := t.peers[mac]; ok {
			bad++
		}
	}
	for addr := range t.failedAddrs {
		mac, ok := t.byAddr[addr]
		if _, fdbFailed := t.failedMACs[mac]; ok && !fdbFailed {
			bad++
		}
	}
	return len(t.peers) - bad
}
