package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDemoStopsCleanly: `lab demo` stopped by Ctrl-C (SIGINT) or a closed terminal (SIGHUP)
// removes everything it made and exits 0.
func TestDemoStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: needs root, the control plane and the tabby binaries")
	}
	bin := filepath.Join(t.TempDir(), "lab")
	if out, err := exec.Command("go", "build", "-o", bin, "../lab/cmd/lab").CombinedOutput(); err != nil {
		t.Fatalf("build the lab: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "--nodes", "1", "--pods", "1", "demo")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // as from its own terminal
			pr, pw, _ := os.Pipe()
			cmd.Stdout, cmd.Stderr = pw, pw
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			var mu sync.Mutex
			var out bytes.Buffer
			ready := make(chan string, 1)
			eof := make(chan struct{}) // the demo closed its output: it exited
			go func() {
				defer close(eof)
				idRe := regexp.MustCompile(`grep (tl-[0-9a-f]+)`)
				sc := bufio.NewScanner(pr)
				for sc.Scan() {
					mu.Lock()
					out.WriteString(sc.Text() + "\n")
					mu.Unlock()
					if m := idRe.FindStringSubmatch(sc.Text()); m != nil {
						ready <- m[1]
					}
				}
			}()
			var prefix string
			select {
			case prefix = <-ready:
			case <-eof:
				err := cmd.Wait()
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("demo exited before it was up (%v):\n%s", err, out.String())
			case <-time.After(2 * time.Minute):
				_ = cmd.Process.Kill()
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("demo not up after 2 minutes:\n%s", out.String())
			}
			if n := countNetns(t, prefix); n == 0 {
				t.Fatalf("demo up but no namespace %s*", prefix)
			}
			_ = cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					mu.Lock()
					defer mu.Unlock()
					t.Fatalf("demo stopped by %s: %v\n%s", sig, err, out.String())
				}
			case <-time.After(90 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("demo did not stop within 90s of %s", sig)
			}
			if n := countNetns(t, prefix); n != 0 {
				t.Fatalf("%d namespaces %s* left after %s", n, prefix, sig)
			}
		})
	}
}

func countNetns(t *testing.T, prefix string) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, prefix+"-") {
			n++
		}
	}
	return n
}
