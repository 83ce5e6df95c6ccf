// Package proc starts the helper processes of tests, the lab and the benchmarks (etcd and
// kube-apiserver, tabby-node in a node's namespace, a BGP daemon, a kubelet): their output
// appended to a log file, and killed when the process that started them dies, even by SIGKILL,
// so that none outlives a crashed test.
package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options tune Start.
type Options struct {
	// Log is the file stdout and stderr are appended to (a restarted process's log follows the
	// one before); empty discards them.
	Log string
	// Header is written to the log before the process starts (which start it is, and why).
	Header string
	// Env is added to this process's environment.
	Env []string
	// Cloneflags are namespaces the process gets of its own (syscall.CLONE_NEWNET).
	Cloneflags uintptr
}

// Proc is a started process.
type Proc struct {
	Name string
	Log  string
	Cmd  *exec.Cmd

	exited chan struct{}
	err    error // set before exited is closed
}

// Start starts argv. The process is killed when this one dies.
func Start(name string, argv []string, o Options) (*Proc, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("start %s: no command", name)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(o.Env) > 0 {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Cloneflags: o.Cloneflags}
	if o.Log != "" {
		logf, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		// The child has its own descriptor once started.
		defer logf.Close()
		if o.Header != "" {
			fmt.Fprintf(logf, "==== %s at %s\n", strings.TrimSpace(o.Header), time.Now().Format(time.RFC3339Nano))
		}
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	if err := startOnForkerThread(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Log: o.Log, Cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has exited and been waited for.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Running says whether the process is still up.
func (p *Proc) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Err is how the process ended (nil while it runs, or when it exited with status 0).
func (p *Proc) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// ExitError describes how the process ended, with the end of its log.
func (p *Proc) ExitError() error {
	return fmt.Errorf("%s exited (%v); log %s:\n%s", p.Name, p.Err(), p.Log, Tail(p.Log, 15))
}

// Signal sends sig; a process that has already exited is no error.
func (p *Proc) Signal(sig syscall.Signal) error {
	if err := p.Cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.Name, err)
	}
	return nil
}

// Stop sends sig and waits for the process to exit; after grace it is killed, and the error
// says so.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) error {
	if p == nil || !p.Running() {
		return nil
	}
	if err := p.Signal(sig); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = p.Cmd.Process.Kill()
	<-p.exited
	return fmt.Errorf("%s did not exit %v after %v: killed", p.Name, grace, sig)
}

// StopAll sends every process sig at once, then waits for each as Stop does.
func StopAll(ps []*Proc, sig syscall.Signal, grace time.Duration) error {
	for _, p := range ps {
		if p != nil && p.Running() {
			_ = p.Signal(sig)
		}
	}
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Stop(sig, grace))
	}
	return errors.Join(errs...)
}

// The kernel ties Pdeathsig to the thread that forked the child, not to the process: when that
// thread exits, the child is killed. Go ends a thread whose goroutine exits while locked to it —
// which network-namespace helpers do all the time — so a process forked from an ordinary
// goroutine can be SIGKILLed at any moment. Forking from one thread that is locked and never
// released ties the child's life to this process, as intended.
var (
	forkerOnce sync.Once
	forkReqs   chan forkReq
)

type forkReq struct {
	cmd  *exec.Cmd
	done chan error
}

func startOnForkerThread(cmd *exec.Cmd) error {
	forkerOnce.Do(func() {
		forkReqs = make(chan forkReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range forkReqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	forkReqs <- forkReq{cmd: cmd, done: done}
	return <-done
}

// Tail is the last lines of a file (its error's text if it cannot be read).
func Tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	cnt := 0
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' && i != len(b)-1 {
			cnt++
			if cnt >= lines {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}
