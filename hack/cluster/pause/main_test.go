package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestExitsOnSignal(t *testing.T) {
	bin := build(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // past signal.Notify
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%v: %v, want exit 0; stderr %s", sig, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "Shutting down") {
			t.Errorf("%v: stderr %q", sig, stderr.String())
		}
	}
}

// children returns the PIDs whose parent is ppid, with their states.
func children(t *testing.T, ppid int) map[int]string {
	t.Helper()
	out := map[int]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out[pid] = f[0]
		}
	}
	return out
}

// As the init of a PID namespace, pause inherits the orphans of processes that enter it and
// must reap them when they exit.
func TestReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("no nsenter")
	}
	bin := build(t)
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(200 * time.Millisecond)
	pid := cmd.Process.Pid
	// nsenter's shell runs outside the namespace, its children inside: once the shell exits,
	// the two sleeps are orphans of the namespace, adopted by pause.
	if out, err := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--pid", "--",
		"/bin/sh", "-c", "sleep 0.5 >/dev/null 2>&1 & sleep 0.6 >/dev/null 2>&1 & exit 0").CombinedOutput(); err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	if n := len(children(t, pid)); n != 2 {
		t.Fatalf("pause adopted %d processes, want 2: %v", n, children(t, pid))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		kids := children(t, pid)
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children of pause left after they exited: %v (Z: not reaped)", kids)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("pause after SIGTERM: %v, want exit 0", err)
	}
}
