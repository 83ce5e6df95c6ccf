package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The main goroutine keeps the main thread (which the runtime never ends): every test goroutine
// then runs on a thread that ends when a goroutine locked to it returns.
func init() { runtime.LockOSThread() }

// A goroutine that locks its thread and returns ends that thread, and the kernel then kills
// every child forked from it with Pdeathsig: a helper started from a network-namespace helper's
// goroutine must survive that.
func TestChildOutlivesTheThreadThatStartedIt(t *testing.T) {
	type started struct {
		p       *Proc
		control *exec.Cmd
		err     error
	}
	ch := make(chan started)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		var s started
		if s.p, s.err = Start("sleep", []string{"sleep", "60"}, Options{}); s.err != nil {
			ch <- s
			return
		}
		// The control is forked from this thread as exec.Cmd does by default.
		s.control = exec.Command("sleep", "60")
		s.control.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		s.err = s.control.Start()
		ch <- s
	}()
	s := <-ch
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { _ = s.p.Stop(syscall.SIGKILL, 10*time.Second) })
	controlDone := make(chan error, 1)
	go func() { controlDone <- s.control.Wait() }()
	select {
	case <-controlDone:
	case <-time.After(30 * time.Second):
		_ = s.control.Process.Kill()
		t.Fatal("the control child outlived the thread that forked it: the premise of this test does not hold")
	}
	// Both children got their parent-death signal at the same moment if they were tied to the
	// same thread; the control is reaped, so a killed child would be a zombie or gone by now.
	if !s.p.Running() || processState(s.p.Pid()) == 'Z' {
		t.Fatalf("the child started by Start died with the thread that asked for it (%v)", s.p.Err())
	}
}

func processState(pid int) byte {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 'X'
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) == 0 {
		return '?'
	}
	return f[0][0]
}

func TestLogStopAndExitError(t *testing.T) {
	log := filepath.Join(t.TempDir(), "out.log")
	p, err := Start("echoer", []string{"sh", "-c", "echo hello; trap 'echo bye; exit 3' TERM; while :; do sleep 0.1; done"},
		Options{Log: log, Header: "test: start #1 of echoer", Env: []string{"X=1"}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(Tail(log, 5), "hello") {
		if time.Now().After(deadline) {
			t.Fatalf("no output in the log: %q", Tail(log, 5))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("running after Stop")
	}
	got := Tail(log, 10)
	if !strings.HasPrefix(got, "==== test: start #1 of echoer at ") || !strings.Contains(got, "bye") {
		t.Fatalf("log = %q, want the header, the output and the trap's", got)
	}
	if e := p.ExitError().Error(); !strings.Contains(e, "exit status 3") || !strings.Contains(e, "bye") {
		t.Fatalf("ExitError = %q, want the status and the log's end", e)
	}
	// A second start appends.
	p2, err := Start("echoer", []string{"echo", "again"}, Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	<-p2.Exited()
	if got := Tail(log, 20); !strings.Contains(got, "hello") || !strings.HasSuffix(got, "again\n") {
		t.Fatalf("log after a second start = %q", got)
	}
}
