// Package memlimit gives the Go runtime a soft memory limit from the process's cgroup, so that
// an agent near its container's limit collects harder instead of being killed by the kernel.
// Go's runtime does not read the cgroup itself (GOMEMLIMIT is off unless set).
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// Share is the part of the cgroup's limit the runtime may use: the rest is for what the Go
// runtime does not count (the binary's pages, the kernel's socket buffers charged to the cgroup).
const Share = 0.9

// unlimited: cgroup v1 reports no limit as the largest page-aligned int64.
const unlimited = 1 << 62

// limitFiles returns the files that may hold the memory limit of the cgroup a process is in,
// from its /proc/PID/cgroup: cgroup v1's memory hierarchy when it has one, else v2's unified
// one. The cgroup's path is the one this process sees; the cgroup filesystem mounted here may
// show that path (a process on the host, a container sharing the host's cgroup namespace), or
// show the container's own cgroup as its root (a container with its own namespace, or cgroup
// v1's mount in any container), so both are candidates, in that order.
func limitFiles(fsRoot string, self []byte) []string {
	var v2 string
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && controllers == "" {
			v2 = path
		}
		if slices.Contains(strings.Split(controllers, ","), "memory") {
			dir := filepath.Join(fsRoot, "memory")
			return candidates(dir, path, "memory.limit_in_bytes")
		}
	}
	if v2 == "" {
		return nil
	}
	return candidates(fsRoot, v2, "memory.max")
}

func candidates(dir, path, file string) []string {
	own := filepath.Join(dir, path, file)
	if root := filepath.Join(dir, file); root != own {
		return []string{own, root}
	}
	return []string{own}
}

// FromCgroup returns the memory limit of the cgroup a process is in (its /proc/PID/cgroup is
// self, the cgroup filesystem is mounted at fsRoot), in bytes, and the file it read; 0 when
// there is none. At a hierarchy's root there is no limit, or one that says none.
func FromCgroup(fsRoot string, self []byte) (int64, string, error) {
	for _, path := range limitFiles(fsRoot, self) {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, path, fmt.Errorf("read memory limit: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, path, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, path, fmt.Errorf("memory limit in %s: %q is not a number of bytes", path, v)
		}
		if n >= unlimited {
			return 0, path, nil
		}
		return n, path, nil
	}
	return 0, "", nil
}

// Apply sets the runtime's soft memory limit to Share of this process's cgroup's limit, unless
// GOMEMLIMIT is set (the operator's choice stands) or the cgroup has no limit. It returns the
// limit it set (0 if none) and what it was read from. A limit on a parent cgroup only (a pod's,
// say) is not looked for.
func Apply() (int64, string, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, "GOMEMLIMIT", nil
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, "", fmt.Errorf("read memory limit: %w", err)
	}
	n, from, err := FromCgroup("/sys/fs/cgroup", self)
	if err != nil || n == 0 {
		return 0, from, err
	}
	lim := int64(float64(n) * Share)
	debug.SetMemoryLimit(lim)
	return lim, from, nil
}
