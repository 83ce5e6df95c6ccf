package bird

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

const helperEnv = "TABBY_BIRD_HELPER_NODE"

// helperSpec is what a child speaker process runs.
type helperSpec struct {
	Self  model.Node
	Nodes []model.Node
	Local []netip.Prefix // blocks of Self
}

// TestHelperSpeaker is not a test: it is a tabby node's BGP agent in a child process, for the
// tests that need to SIGKILL one.
func TestHelperSpeaker(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("helper process only")
	}
	var spec helperSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{NodeName: spec.Self.Name, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	send(b, nodeUpdates(spec.Nodes...)...)
	send(b, poolUpdate(pool))
	for _, p := range spec.Local {
		send(b, claim(p, spec.Self.Name))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	_ = b.Run(ctx)
}

func startHelper(t *testing.T, spec helperSpec) *exec.Cmd {
	t.Helper()
	netnstest.AddLoopback(t, addr4(spec.Self))
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSpeaker$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// TestKilledNodeKeepsRoutes: a tabby-node SIGKILLed keeps its routes at its peers: the TCP
// connection closes without a NOTIFICATION, which says the node's kernel, and so the routes and
// rules its agent programmed, live on. They stay for the restart time (crash_test.go: and go
// after it), where a node cut off loses them within the hold time (TestDeadNodeFlush).
func TestKilledNodeKeepsRoutes(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(51, nil, ""), mkNode(52, nil, "")}
	b := startNode(t, all[1], all, nil)
	cmd := startHelper(t, helperSpec{Self: all[0], Nodes: all, Local: []netip.Prefix{blockOf(51)}})
	b.routes.waitRoute(t, blockOf(51), addr4(all[0]), 20*time.Second)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	st := b.waitPeer(t, addr4(all[0]), "down", 10*time.Second)
	// A dead node's flush takes milliseconds; nothing drops them now before the restart time.
	time.Sleep(4 * time.Second)
	if _, ok := b.routes.get(blockOf(51)); !ok {
		t.Fatalf("a killed tabby-node's block was dropped at its peer (status %+v)", st)
	}
	t.Logf("killed node's block kept; the peer says %q", st.Info)
}
