package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary a stand-in for `cluster up`: untilStopped around a start that
// prints "up" and a stop that prints "stopped" (or fails, with "fail").
const childEnv = "TABBY_CLUSTER_TEST_UNTIL_STOPPED"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(untilStoppedChild(mode))
	}
	os.Exit(m.Run())
}

// untilStoppedChild is main's path for `up`, with the cluster left out: the same signals, the
// same exit status for an error.
func untilStoppedChild(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	err := untilStopped(ctx, func(context.Context) (func(context.Context) error, error) {
		fmt.Println("up")
		return func(context.Context) error {
			if mode == "fail" {
				return errors.New("teardown failed")
			}
			fmt.Println("stopped")
			return nil
		}, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	return 0
}

// TestStopBySignalExitsZero: `cluster up` stopped by Ctrl-C, SIGTERM or a closed terminal tears
// down and exits 0, so that `make cluster` ends without an error; a teardown that fails exits 1.
func TestStopBySignalExitsZero(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		mode string
		code int
	}{
		{syscall.SIGINT, "ok", 0},
		{syscall.SIGTERM, "ok", 0},
		{syscall.SIGHUP, "ok", 0},
		{syscall.SIGINT, "fail", 1},
	} {
		t.Run(fmt.Sprintf("%s-%s", c.sig, c.mode), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+c.mode)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			// The signal goes once the child is up, and so has its handler.
			if !lines.Scan() || lines.Text() != "up" {
				t.Fatalf("child did not come up: %q %v", lines.Text(), lines.Err())
			}
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			var rest []string
			for lines.Scan() {
				rest = append(rest, lines.Text())
			}
			err = cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Errorf("stopped by %s: exit status %d, want %d (stdout %q, stderr %q)", c.sig, code, c.code, rest, stderr.String())
			}
			if c.code == 0 && (len(rest) != 1 || rest[0] != "stopped") {
				t.Errorf("stopped by %s without tearing down: stdout %q", c.sig, rest)
			}
			if c.code != 0 && !strings.Contains(stderr.String(), "stop: teardown failed") {
				t.Errorf("failed teardown not reported: %q", stderr.String())
			}
		})
	}
}

// TestMakeClusterRunsTheBuiltCommand: `make cluster` runs the built command, not `go run`, which
// exits 1 whenever Ctrl-C reaches it, whatever the program did.
func TestMakeClusterRunsTheBuiltCommand(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	out, err := exec.Command("make", "-n", "-C", root, "cluster").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n cluster: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "bin/cluster up") || strings.Contains(string(out), "run -C hack ./cluster/cmd/cluster up") {
		t.Errorf("make cluster does not run the built command:\n%s", out)
	}
}
