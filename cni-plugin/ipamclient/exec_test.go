package ipamclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// The test binary is also the tabby-ipam that ExecOpener runs: with ExecEnv set it serves one
// call over a fake allocator, which fails with ErrExhausted when the kubeconfig says so.
func TestMain(m *testing.M) {
	if method := os.Getenv(ExecEnv); method != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		open := func(_ context.Context, kubeconfig string, _ bool) (api.Service, error) {
			f := &fake{}
			if kubeconfig == "exhausted" {
				f.err = fmt.Errorf("%w: pool p", api.ErrExhausted)
			}
			return f.service(), nil
		}
		if err := ServeExec(ctx, method, open, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func execService(t *testing.T, kubeconfig string) api.Service {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CNI_PATH", filepath.Dir(self))
	svc, err := ExecOpener(filepath.Base(self))(context.Background(), kubeconfig, false)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// The tabby plugin's direct path: the reply and the error's kind come back through an exec.
func TestExecTransport(t *testing.T) {
	ctx := context.Background()
	r, err := execService(t, "ok").Assign(ctx, &api.AssignRequest{Handle: "n.c", Node: "a"})
	if err != nil || r.Assignment.IP.String() != "10.244.0.9" {
		t.Fatalf("assign over exec: %+v %v", r, err)
	}
	if _, err := execService(t, "exhausted").Assign(ctx, &api.AssignRequest{Handle: "n.c", Node: "a"}); !errors.Is(err, api.ErrExhausted) {
		t.Fatalf("assign over exec: %v, want ErrExhausted", err)
	}
	// A method the fake leaves out: ErrInvalid from the other process, as from tabby-node.
	if _, err := execService(t, "ok").GC(ctx, &api.GCRequest{Node: "a", Network: "n"}); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("GC over exec: %v, want ErrInvalid", err)
	}
}

func TestExecBinaryMissing(t *testing.T) {
	t.Setenv("CNI_PATH", t.TempDir())
	if _, err := ExecOpener("tabby-ipam-absent")(context.Background(), "", false); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("missing binary: %v, want ErrUnavailable", err)
	}
}
