package lab

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPowerCycle: a node's power cut takes its namespace and pods away without a word to its
// peers, which drop its routes when their sessions time out; it boots with the same name,
// address and MAC address, its pod restarts with a new sandbox, and the pod is reachable again.
func TestPowerCycle(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, the control plane and the tabby binaries (skipped under -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	l, err := New(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(l.Diagnostics(context.Background()))
		}
		_ = l.Close(context.Background())
	})
	nodes, err := l.AddNodes(ctx, NodeSpec{Name: "node-1"}, NodeSpec{Name: "node-2"})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := nodes[0], nodes[1]
	pods, err := l.AddPods(ctx, PodSpec{Name: "a", Node: n1.Name}, PodSpec{Name: "b", Node: n2.Name})
	if err != nil {
		t.Fatal(err)
	}
	a, b := pods[0], pods[1]
	if err := Eventually(ctx, time.Minute, func(ctx context.Context) error { return Ping(ctx, a.NS, b.IP) }); err != nil {
		t.Fatalf("a→b before the power cut: %v", err)
	}
	mac := func() string {
		out, err := n2.Exec(ctx, "cat", "/sys/class/net/eth0/address")
		if err != nil {
			t.Fatalf("node-2's MAC address: %v", err)
		}
		return strings.TrimSpace(out)
	}
	before := mac()

	gone, err := l.PowerOff(ctx, n2.Name)
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	if len(gone) != 1 || gone[0].Name != "b" || l.Pod("b") != nil {
		t.Fatalf("power off returned %d pods and left b in the lab: %v", len(gone), l.Pod("b"))
	}
	if _, err := n2.Exec(ctx, "true"); err == nil {
		t.Fatal("node-2's namespace is still there after the power cut")
	}
	err = Eventually(ctx, time.Minute, func(ctx context.Context) error {
		rs, err := n1.TabbyRoutes(ctx)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Gateway == n2.IP().String() {
				return fmt.Errorf("node-1 still routes %s via node-2", r.Dst)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node-1 dropped node-2's routes %s after the cut", time.Since(cut).Round(100*time.Millisecond))

	boot := time.Now()
	if err := l.PowerOn(ctx, n2.Name); err != nil {
		t.Fatal(err)
	}
	if after := mac(); after != before {
		t.Errorf("node-2 booted with MAC address %s, had %s: its neighbours' entries for it are wrong", after, before)
	}
	b2, err := l.RestartPod(ctx, gone[0])
	if err != nil {
		t.Fatal(err)
	}
	if b2.ContainerID == b.ContainerID || b2.UID != b.UID {
		t.Errorf("restarted pod: container %s (was %s), UID %s (was %s): want a new sandbox of the same Pod", b2.ContainerID, b.ContainerID, b2.UID, b.UID)
	}
	if err := Eventually(ctx, time.Minute, func(ctx context.Context) error { return Ping(ctx, a.NS, b2.IP) }); err != nil {
		t.Fatalf("a→b after node-2's boot: %v", err)
	}
	t.Logf("b reachable again %s after node-2 booted", time.Since(boot).Round(100*time.Millisecond))
}
