package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// Concurrent Assigns on one node that arrive while a block update is in flight are written
// together in one update, and each still gets its own address. With conflictBatch, the batched
// update loses its compare-and-swap once and the whole batch is retried.
func TestConcurrentAssignsAreBatched(t *testing.T) {
	for _, conflictBatch := range []bool{false, true} {
		t.Run(fmt.Sprintf("conflict=%v", conflictBatch), func(t *testing.T) {
			ctx := context.Background()
			s := newFake(t)
			s.AddPool("p", "10.244.0.0/24", 26)
			a := ipam.New(s, ipam.Config{})
			if _, err := a.Assign(ctx, req("n1", "warm")); err != nil {
				t.Fatal(err)
			}
			// Hold the first update in flight until the others have queued behind it.
			hold := make(chan struct{})
			var mu sync.Mutex
			updates := 0
			s.Inject(func(op ipamtest.Op, name string) error {
				if op != "UpdateBlock" {
					return nil
				}
				mu.Lock()
				updates++
				n := updates
				mu.Unlock()
				if n == 1 {
					<-hold
				}
				if n == 2 && conflictBatch {
					return ipamtest.ConflictOnce("UpdateBlock", 1)(op, name)
				}
				return nil
			})
			s.ResetCalls()
			const n = 10
			ips := make([]netip.Addr, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			run := func(i int) {
				wg.Go(func() {
					x, err := a.Assign(ctx, req("n1", fmt.Sprint("c", i)))
					ips[i], errs[i] = x.IP, err
				})
			}
			run(0)
			testwait.Until(t, "the first update in flight", 10*time.Second, func() bool { return s.Calls("UpdateBlock") == 1 })
			for i := 1; i < n; i++ {
				run(i)
			}
			testwait.Until(t, "9 assigns queued", 10*time.Second, func() bool { return ipam.QueuedAssigns(a, "n1") == n-1 })
			close(hold)
			wg.Wait()
			seen := map[netip.Addr]bool{}
			for i := range n {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if seen[ips[i]] || !ips[i].IsValid() {
					t.Fatalf("duplicate or missing address %v", ips[i])
				}
				seen[ips[i]] = true
			}
			want := 2 // the first request's update, then one for the 9 queued
			if conflictBatch {
				want = 3 // and the batch again after its lost compare-and-swap
			}
			if got := s.Calls("UpdateBlock"); got != want {
				t.Fatalf("%d block updates for %d assigns, want %d", got, n, want)
			}
			s.Inject(nil)
			// The datastore agrees: every request's allocation under its own handle, each
			// handle listing the block.
			for i := range n {
				got, err := a.Lookup(ctx, fmt.Sprint("net.c", i))
				if err != nil || len(got) != 1 || got[0].IP != ips[i] {
					t.Fatalf("lookup c%d: %+v %v, want %v", i, got, err, ips[i])
				}
			}
			if c := countAllocations(s); c != n+1 {
				t.Fatalf("%d allocations, want %d", c, n+1)
			}
		})
	}
}

// A batch's requests fail or succeed on their own: one whose block cannot be claimed fails
// alone, the others of its batch are written.
func TestBatchFailsRequestsAlone(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("a", "10.244.0.0/26", 26)
	s.AddPool("b", "10.244.1.0/26", 26)
	a := ipam.New(s, ipam.Config{})
	if _, err := a.Assign(ctx, ipam.Request{Handle: "net.warm", Node: "n1", Pools: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	var once sync.Once
	s.Inject(func(op ipamtest.Op, name string) error {
		switch {
		case op == "UpdateBlock":
			once.Do(func() { <-hold })
		case op == "CreateBlock":
			return fmt.Errorf("etcd is on fire")
		}
		return nil
	})
	s.ResetCalls()
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	run := func(id string, pools ...string) {
		wg.Go(func() {
			_, err := a.Assign(ctx, ipam.Request{Handle: "net." + id, Node: "n1", Pools: pools})
			mu.Lock()
			errs[id] = err
			mu.Unlock()
		})
	}
	run("first", "a")
	testwait.Until(t, "the first update in flight", 10*time.Second, func() bool { return s.Calls("UpdateBlock") == 1 })
	// "bad" asks for pool b, where the node has no block: its claim fails.
	run("ok1", "a")
	run("bad", "b")
	run("ok2", "a")
	testwait.Until(t, "3 assigns queued", 10*time.Second, func() bool { return ipam.QueuedAssigns(a, "n1") == 3 })
	close(hold)
	wg.Wait()
	s.Inject(nil)
	for _, id := range []string{"first", "ok1", "ok2"} {
		if errs[id] != nil {
			t.Errorf("%s: %v", id, errs[id])
		}
	}
	if errs["bad"] == nil || !strings.Contains(errs["bad"].Error(), "etcd is on fire") {
		t.Fatalf("bad: %v, want the claim's error", errs["bad"])
	}
	if got, _ := a.Lookup(ctx, "net.bad"); len(got) != 0 {
		t.Fatalf("the failed request holds %v", got)
	}
	if c := countAllocations(s); c != 4 {
		t.Fatalf("%d allocations, want 4", c)
	}
	if _, err := s.GetHandle(ctx, names.HandleName("net.bad")); err == nil {
		t.Fatal("the failed request left its handle")
	}
}
