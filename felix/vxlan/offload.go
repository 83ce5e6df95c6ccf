package vxlan

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ChecksumOffload says whether tabby's VXLAN devices keep tx checksum offload (ethtool's
// tx-checksumming, tx-checksum-ip-generic on a vxlan device): with it on, the inner packet's
// TCP or UDP checksum is completed after encapsulation, by the underlay device or the stack;
// with it off, the VXLAN device computes it as it sends, costing a pass over every packet.
//
// Before Linux 5.7, the kernel's NAT rewrote the outer UDP checksum of VXLAN packets even when
// it was zero (unused), which with offload left the inner checksum wrong on some paths: traffic
// through a NodePort or a masquerade stalled (Calico's issue 3145, flannel's "63 second"
// delays). Calico and flannel turn offload off on their device for it; the kernel fixed it in
// 5.7 ("netfilter: nat: never update the UDP checksum when it's 0").
type ChecksumOffload string

const (
	// ChecksumOffloadAuto keeps offload on, except on a kernel older than 5.7.
	ChecksumOffloadAuto ChecksumOffload = ""
	ChecksumOffloadOn   ChecksumOffload = "on"
	ChecksumOffloadOff  ChecksumOffload = "off"
)

// Valid tells whether c is one of the three.
func (c ChecksumOffload) Valid() bool {
	return c == ChecksumOffloadAuto || c == ChecksumOffloadOn || c == ChecksumOffloadOff
}

// Wanted decides offload on a kernel of release (uname -r, "6.8.0-45-generic").
func (c ChecksumOffload) Wanted(release string) bool {
	switch c {
	case ChecksumOffloadOn:
		return true
	case ChecksumOffloadOff:
		return false
	}
	major, minor, err := kernelVersion(release)
	if err != nil {
		return true // unknown: the kernel's own default
	}
	return major > 5 || major == 5 && minor >= 7
}

func kernelVersion(release string) (major, minor int, err error) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("kernel release %q: no major.minor", release)
	}
	if major, err = strconv.Atoi(parts[0]); err != nil {
		return 0, 0, fmt.Errorf("kernel release %q: %w", release, err)
	}
	minorStr := parts[1]
	if i := strings.IndexFunc(minorStr, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorStr = minorStr[:i]
	}
	if minor, err = strconv.Atoi(minorStr); err != nil {
		return 0, 0, fmt.Errorf("kernel release %q: %w", release, err)
	}
	return major, minor, nil
}

// kernelRelease is this kernel's release, "" when uname fails.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
