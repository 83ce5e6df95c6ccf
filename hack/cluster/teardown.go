package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// removeCgroups kills every process below cgroup root (in every hierarchy) and removes the
// cgroups, deepest first. Container processes are found this way whatever namespaces they are in.
func removeCgroups(root string) error {
	var errs []error
	for _, h := range cgroupHierarchies(true) {
		top := filepath.Join(h, root)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			var dirs []string
			_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			left := 0
			for i := len(dirs) - 1; i >= 0; i-- {
				pids := cgroupPids(dirs[i])
				left += len(pids)
				_ = killPids(pids)
				_ = syscall.Rmdir(dirs[i])
			}
			if _, err := os.Stat(top); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("cgroup %s: %d processes would not die", top, left))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

func cgroupPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountNSPids lists the processes in the mount namespace kept at file.
func mountNSPids(file string) ([]int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(file, &st); err != nil {
		return nil, err
	}
	want := fmt.Sprintf("mnt:[%d]", st.Ino)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt")); err == nil && l == want {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killMountNS kills every process in the mount namespace kept at file (containerd, its shims).
func killMountNS(file string) error {
	if !isNSMount(file) {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := mountNSPids(file)
		if err != nil || len(pids) == 0 {
			return err
		}
		_ = killPids(pids)
		if time.Now().After(deadline) {
			return fmt.Errorf("mount namespace %s: processes %v would not die", file, pids)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isNSMount says whether file is a bind-mounted namespace (and not the empty file under it).
func isNSMount(file string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(file, &st); err != nil {
		return false
	}
	const nsfsMagic = 0x6e736673
	return st.Type == nsfsMagic
}

// unmountNS releases the mount namespace kept at file (it ends with its last process) and
// removes the file.
func unmountNS(ctx context.Context, file string) error {
	if isNSMount(file) {
		if err := syscall.Unmount(file, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", file, err)
		}
	}
	if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Cleanup removes what dead clusters left behind: the processes of their nodes (found by mount
// namespace and cgroup), the nodes' mount namespaces, then everything the lab underneath left
// (namespaces, state directories). Running clusters are not touched.
func Cleanup(ctx context.Context, log *slog.Logger) error {
	left, err := lab.FindLeftovers()
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range left.StateDirs {
		id := filepath.Base(dir)
		mnt := filepath.Join(dir, "mnt")
		ents, _ := os.ReadDir(mnt)
		for _, e := range ents {
			f := filepath.Join(mnt, e.Name())
			if err := killMountNS(f); err != nil {
				errs = append(errs, err)
			}
			if err := unmountNS(ctx, f); err != nil {
				errs = append(errs, err)
			}
		}
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mnt, err))
		}
		roots := map[string]bool{}
		for _, h := range cgroupHierarchies(true) {
			matches, _ := filepath.Glob(filepath.Join(h, lab.NetnsPrefix+id+"-*"))
			for _, m := range matches {
				roots["/"+filepath.Base(m)] = true
			}
		}
		for r := range roots {
			if err := removeCgroups(r); err != nil {
				errs = append(errs, err)
			}
		}
		log.Info("removed a dead cluster's nodes", "lab", id, "mountNamespaces", len(ents), "cgroupRoots", len(roots))
	}
	removed, err := lab.Cleanup(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	if !removed.Empty() {
		log.Info("removed a dead lab's leftovers", "what", removed.String())
	}
	return errors.Join(errs...)
}
