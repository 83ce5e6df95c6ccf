//go:build linux

package netutils

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// UnreadBytes is how much the peer sent on conn that the kernel holds and we have not read
// yet (SIOCINQ); 0 when it cannot tell. tabby's change (TABBY.md).
func UnreadBytes(conn net.Conn) int {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
