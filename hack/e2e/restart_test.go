package e2e

import (
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// TestRestartNoLoss: a continuous ping (20 packets/s) between pods on two nodes while tabby-node
// on one of them is restarted three times (SIGTERM, start again): not one packet is lost. The
// restart-style shutdown keeps the kernel routes and the peers keep the node's routes
// (graceful restart).
func TestRestartNoLoss(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 5*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(2)...)
	pods := addPodsPerNode(t, ctx, l, nodes, 1)
	a, b := pods[0], pods[1]
	requireReach(t, ctx, "pod to pod", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
	for _, n := range nodes {
		if err := n.WaitPeers(ctx, 15*time.Second, peersExcept(nodes, n)...); err != nil {
			t.Fatal(err)
		}
	}

	var out bytes.Buffer
	ping := exec.Command("ip", "netns", "exec", a.NS, "ping", "-n", "-q", "-i", "0.05", b.IP.String())
	ping.Stdout, ping.Stderr = &out, &out
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = ping.Process.Signal(syscall.SIGINT)
			_ = ping.Wait()
		}
	}
	t.Cleanup(stop)
	time.Sleep(500 * time.Millisecond) // packets flowing before the first restart
	for i := 1; i <= 3; i++ {
		start := time.Now()
		if err := nodes[0].Restart(ctx); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
		for _, n := range nodes {
			if err := n.WaitPeers(ctx, 30*time.Second, peersExcept(nodes, n)...); err != nil {
				t.Fatalf("after restart %d: %v", i, err)
			}
		}
		t.Logf("restart %d of tabby-node on %s: ready with sessions up in %s", i, nodes[0].Name, time.Since(start).Round(time.Millisecond))
	}
	time.Sleep(500 * time.Millisecond) // packets flowing after the last restart
	stop()
	m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("ping output without statistics:\n%s", out.String())
	}
	sent, _ := strconv.Atoi(m[1])
	got, _ := strconv.Atoi(m[2])
	t.Logf("ping %s -> %s: %d sent, %d received", a.Name, b.Name, sent, got)
	if sent < 40 {
		t.Fatalf("only %d packets sent: the test did not exercise anything\n%s", sent, out.String())
	}
	if got != sent {
		t.Fatalf("%d of %d packets lost across three restarts of tabby-node:\n%s", sent-got, sent, out.String())
	}
}
