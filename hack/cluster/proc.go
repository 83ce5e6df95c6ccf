package cluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/tabbynet/tabby/internal/proc"
)

// startProc starts a long-running component (containerd, kubelet, kube-proxy, a controller)
// with its output appended to logPath. With netns or mntns set it runs there (nsenter execs in
// place, so the pid and signals are the component's own). It dies with the process that made
// the cluster, even if that one is killed.
func startProc(name, logPath, mntns, netns string, env []string, argv ...string) (*proc.Proc, error) {
	header := "cluster: start " + name + ": " + strings.Join(argv, " ")
	if mntns != "" || netns != "" {
		pre := []string{"nsenter"}
		if mntns != "" {
			pre = append(pre, "--mount="+mntns)
		}
		if netns != "" {
			pre = append(pre, "--net="+netns)
		}
		argv = append(append(pre, "--"), argv...)
	}
	return proc.Start(name, argv, proc.Options{Log: logPath, Header: header, Env: env})
}

// killAll sends SIGKILL to pids until none of them is left (they may be respawned children of
// one another, e.g. shims of containers).
func killPids(pids []int) error {
	var errs []error
	for _, pid := range pids {
		if pid <= 1 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}
