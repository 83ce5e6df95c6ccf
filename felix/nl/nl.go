// Package nl is the small slice of rtnetlink felix uses, behind an interface so the route and
// tunnel managers can run against a fake that injects failures, and against a real netlink
// handle bound to any network namespace.
package nl

import (
	"errors"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteOp is one write of a batch: replace (create or overwrite) or delete a route.
type RouteOp struct {
	Del   bool
	Route *netlink.Route
}

// Handle is the netlink surface felix needs.
type Handle interface {
	// RouteListFilteredIter dumps routes matching the filter, calling f for each until it
	// returns false.
	RouteListFilteredIter(family int, filter *netlink.Route, mask uint64, f func(netlink.Route) bool) error
	RouteReplace(r *netlink.Route) error
	RouteDel(r *netlink.Route) error
	// RouteBatch writes many routes with few syscalls; errs[i] is the kernel's answer to ops[i].
	RouteBatch(ops []RouteOp) (errs []error)

	LinkList() ([]netlink.Link, error)
	LinkByName(name string) (netlink.Link, error)
	LinkAdd(l netlink.Link) error
	LinkSetUp(l netlink.Link) error
	LinkSetMTU(l netlink.Link, mtu int) error
	AddrList(l netlink.Link, family int) ([]netlink.Addr, error)
	AddrReplace(l netlink.Link, a *netlink.Addr) error
	AddrDel(l netlink.Link, a *netlink.Addr) error
	LinkDel(l netlink.Link) error
	LinkSetHardwareAddr(l netlink.Link, hw net.HardwareAddr) error

	// NeighList lists a link's neighbour entries (family AF_INET or AF_INET6) or its FDB
	// entries (AF_BRIDGE), never a list a concurrent change cut short.
	NeighList(linkIndex, family int) ([]netlink.Neigh, error)
	// NeighSet creates or replaces a neighbour entry, or an FDB entry (Family AF_BRIDGE, Flags
	// NTF_SELF: the device's own table, as `bridge fdb replace … self` writes it).
	NeighSet(n *netlink.Neigh) error
	NeighDel(n *netlink.Neigh) error

	// TxChecksumOffload tells whether the link computes the checksums of what it sends late
	// (ethtool's tx-checksumming), and SetTxChecksumOffload turns that on or off.
	TxChecksumOffload(name string) (bool, error)
	SetTxChecksumOffload(name string, on bool) error

	// Subscribe streams route and link changes until done closes. onErr is called when the
	// stream breaks (e.g. the socket overflowed): events were lost and the caller must resync.
	Subscribe(done <-chan struct{}, routes chan<- netlink.RouteUpdate, links chan<- netlink.LinkUpdate, onErr func(error)) error
	// SubscribeNeigh streams neighbour and FDB changes until done closes, as Subscribe does.
	SubscribeNeigh(done <-chan struct{}, neighs chan<- netlink.NeighUpdate, onErr func(error)) error
	Close()
}

// IsNotFound tells whether err means "no such route/link/address/neighbour": a delete that finds nothing
// has reached its goal.
func IsNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EADDRNOTAVAIL) || errors.As(err, &lnf)
}

// IsTransient tells whether retrying the same write may succeed without anything else
// changing (buffer pressure, interrupted dumps, busy kernel).
func IsTransient(err error) bool {
	return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENOBUFS) ||
		errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOMEM) || errors.Is(err, netlink.ErrDumpInterrupted)
}
