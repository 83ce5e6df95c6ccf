package nl

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/internal/nlretry"
)

// NeighList lists neighbour or FDB entries, repeating a dump that raced with a change.
func (r *Real) NeighList(linkIndex, family int) ([]netlink.Neigh, error) {
	return nlretry.Dump(func() ([]netlink.Neigh, error) { return r.Handle.NeighList(linkIndex, family) })
}

// SubscribeNeigh streams neighbour and FDB updates of the handle's namespace.
func (r *Real) SubscribeNeigh(done <-chan struct{}, neighs chan<- netlink.NeighUpdate, onErr func(error)) error {
	ns := r.ns
	if err := netlink.NeighSubscribeWithOptions(neighs, done, netlink.NeighSubscribeOptions{
		Namespace: &ns, ErrorCallback: onErr, ReceiveBufferSize: 4 << 20, ReceiveBufferForceSize: true,
	}); err != nil {
		return fmt.Errorf("subscribe to neighbours: %w", err)
	}
	return nil
}

// ifreqEthtool is struct ifreq carrying a pointer to an ethtool command: the kernel reads the
// whole union, 24 bytes on 64-bit.
type ifreqEthtool struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

type ethtoolValue struct{ cmd, data uint32 }

// ethtool runs one ETHTOOL_G*/S* value command on the link, in the handle's namespace.
func (r *Real) ethtool(name string, cmd, data uint32) (uint32, error) {
	if len(name) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", name)
	}
	var out uint32
	err := r.inNS(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		v := &ethtoolValue{cmd: cmd, data: data}
		var ifr ifreqEthtool
		copy(ifr.name[:], name)
		ifr.data = unsafe.Pointer(v)
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
			return errno
		}
		out = v.data
		return nil
	})
	return out, err
}

// TxChecksumOffload reads ethtool's tx-checksumming of the link.
func (r *Real) TxChecksumOffload(name string) (bool, error) {
	v, err := r.ethtool(name, unix.ETHTOOL_GTXCSUM, 0)
	if err != nil {
		return false, fmt.Errorf("ethtool get tx-checksumming of %s: %w", name, err)
	}
	return v != 0, nil
}

// SetTxChecksumOffload turns ethtool's tx-checksumming of the link on or off.
func (r *Real) SetTxChecksumOffload(name string, on bool) error {
	var data uint32
	if on {
		data = 1
	}
	if _, err := r.ethtool(name, unix.ETHTOOL_STXCSUM, data); err != nil {
		return fmt.Errorf("ethtool set tx-checksumming of %s %v: %w", name, on, err)
	}
	return nil
}

// inNS runs fn on a thread in the handle's namespace: ioctls act on the namespace of the socket,
// and a socket is made in its thread's. The thread is a goroutine's of its own, locked to it: one
// that could not be brought back to its namespace ends with the goroutine.
func (r *Real) inNS(fn func() error) error {
	if !r.ns.IsOpen() {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cur, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer cur.Close()
		if err := netns.Set(r.ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		err = fn()
		if netns.Set(cur) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
