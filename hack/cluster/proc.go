package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// proc is one long-running component (containerd, kubelet, kube-proxy, a controller) with its
// log file.
type proc struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startProc starts argv with stdout and stderr appended to logPath. With netns or mntns set it
// runs there (nsenter execs in place, so the pid and signals are the component's own).
func startProc(name, logPath, mntns, netns string, env []string, argv ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "==== cluster: start %s at %s: %s\n", name, time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
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
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	// A component dies with the process that made the cluster, even if that one is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// running says whether the process is still up.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitError describes how the process ended, with the end of its log.
func (p *proc) exitError() error {
	return fmt.Errorf("%s exited (%v); log %s:\n%s", p.name, p.err, p.log, lab.TailFile(p.log, 15))
}

// stop sends SIGTERM, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil || !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
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
