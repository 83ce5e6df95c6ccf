package e2e

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/tabbynet/tabby/hack/lab"
)

// TestStartUnderLinkChurn: tabby-node restarted again and again on a node where veths come and go
// at a few hundred link changes a second (pods starting and stopping) starts every time. A
// netlink dump that races with a change comes back marked interrupted (NLM_F_DUMP_INTR) with
// partial results; before every dump was repeated, address autodetection failed on it and
// tabby-node exited ("list interfaces: results may be incomplete or inconsistent").
func TestStartUnderLinkChurn(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 4*time.Minute)
	node := addNodes(t, ctx, l, nodeSpecs(1)...)[0]

	// Many links make every dump span several netlink messages, as on a node with many pods.
	const kept = 60
	var changes atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread() // the handle is bound to the node's namespace, not this thread's
		ns, err := netns.GetFromName(node.NS)
		if err != nil {
			errs <- err
			return
		}
		defer ns.Close()
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			errs <- err
			return
		}
		defer h.Close()
		veth := func(name string) *netlink.Veth {
			return &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
		}
		for i := 0; i < kept; i++ {
			if err := h.LinkAdd(veth(fmt.Sprintf("tkeep%d", i))); err != nil {
				errs <- fmt.Errorf("add veth: %w", err)
				return
			}
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := veth(fmt.Sprintf("tchurn%d", i%8))
			if err := h.LinkAdd(v); err == nil {
				changes.Add(1)
				if h.LinkDel(v) == nil {
					changes.Add(1)
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })

	const restarts = 12
	start := time.Now()
	failed := 0
	for i := 1; i <= restarts; i++ {
		select {
		case err := <-errs:
			t.Fatalf("link churn: %v", err)
		default:
		}
		if err := node.Restart(ctx); err != nil {
			failed++
			t.Errorf("start %d of %d under link churn failed: %v\n%s", i, restarts, err, node.LogTail(5))
			if err := node.Start(ctx); err != nil && !node.Running() {
				t.Fatalf("tabby-node does not start any more: %v", err)
			}
		}
	}
	rate := float64(changes.Load()) / time.Since(start).Seconds()
	t.Logf("%d restarts of tabby-node under %.0f link changes/s: %d failed", restarts, rate, failed)
	if rate < 50 {
		t.Errorf("only %.0f link changes/s: the churn did not exercise anything", rate)
	}
}
