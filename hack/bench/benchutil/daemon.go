package benchutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Daemon is a reference daemon a benchmark started (BIRD2 in a node's namespace): its name for
// messages, its process, and a channel closed once the process has been waited for.
type Daemon struct {
	Name   string
	Cmd    *exec.Cmd
	Exited <-chan struct{}
}

// StopDaemons sends every daemon SIGTERM at once, then waits for each; one still running after
// grace is killed, and said so in the error.
func StopDaemons(ds []Daemon, grace time.Duration) error {
	for _, d := range ds {
		if d.Cmd != nil && d.Cmd.Process != nil {
			_ = d.Cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	var errs []error
	for _, d := range ds {
		if d.Cmd == nil || d.Cmd.Process == nil {
			continue
		}
		select {
		case <-d.Exited:
		case <-time.After(grace):
			_ = d.Cmd.Process.Kill()
			<-d.Exited
			errs = append(errs, fmt.Errorf("%s ignored SIGTERM: killed", d.Name))
		}
	}
	return errors.Join(errs...)
}

// LogTail is "; <name> log: <the last 1,000 bytes of path>", or "" when there is none: what a
// failure message appends so the daemon's own words come with it.
func LogTail(name, path string) string {
	out, err := os.ReadFile(path)
	if err != nil || len(out) == 0 {
		return ""
	}
	return "; " + name + " log: " + strings.TrimSpace(string(out[max(0, len(out)-1000):]))
}

// StartBIRD2 runs bird in the foreground in namespace netns with the config at conf, its
// control socket at ctl and pid file at pid, its output in logPath. The process dies with the
// benchmark (the lab kills whatever is left in its namespaces too).
func StartBIRD2(name, netns, conf, ctl, pid, logPath string) (Daemon, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return Daemon{}, err
	}
	defer logf.Close()
	cmd := exec.Command("ip", "netns", "exec", netns, "bird", "-f", "-c", conf, "-s", ctl, "-P", pid)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return Daemon{}, fmt.Errorf("start BIRD2 in %s: %w", netns, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return Daemon{Name: name, Cmd: cmd, Exited: exited}, nil
}
