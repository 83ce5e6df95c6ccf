package gc_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/gc"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// oneNodeStore is a fake store with node n1 and pool p (10.244.0.0/24, /26 blocks).
func oneNodeStore() *ipamtest.Store {
	s := ipamtest.NewStore()
	s.AddNode("n1", nil)
	s.AddPool("p", "10.244.0.0/24", 26)
	return s
}

func TestCollectorUnit(t *testing.T) {
	ctx := context.Background()
	s := oneNodeStore()
	now := time.Unix(1000, 0)
	a := ipam.New(s, ipam.Config{Now: func() time.Time { return now }})
	c := gc.New(s, a, gc.Config{Node: "n1", GracePeriod: time.Minute, Now: func() time.Time { return now }})

	s.AddPod(ipam.Pod{Namespace: "default", Name: "live", NodeName: "n1"})
	liveIP, _ := a.Assign(ctx, ipam.Request{Handle: "net.live", Node: "n1", Namespace: "default", Pod: "live"})
	goneIP, _ := a.Assign(ctx, ipam.Request{Handle: "net.gone", Node: "n1", Namespace: "default", Pod: "gone"})
	tunnel, _ := a.Assign(ctx, ipam.Request{Handle: names.TunnelHandle("n1"), Node: "n1"})
	// A crash between the handle write and the block write.
	if _, err := s.CreateHandle(ctx, &v1.IPAMHandle{ObjectMeta: metav1.ObjectMeta{Name: "net.orphan", Annotations: map[string]string{ipam.AnnotationHandleNode: "n1"}}, Spec: v1.IPAMHandleSpec{HandleID: "net.orphan", Block: map[string]int{"10.244.0.0/26": 1}}}); err != nil {
		t.Fatal(err)
	}
	// A live pod's borrowed allocation (in n2's block) whose handle object went missing. The
	// addresses of n1's own block (net.live) need no handle object: not candidates.
	s.AddNode("n2", nil)
	other, err := ipam.New(s, ipam.Config{}).Assign(ctx, ipam.Request{Handle: "net.other", Node: "n2", Namespace: "default", Pod: "other"})
	if err != nil {
		t.Fatal(err)
	}
	s.AddPod(ipam.Pod{Namespace: "default", Name: "other", NodeName: "n2"})
	s.AddPod(ipam.Pod{Namespace: "default", Name: "nohandle", NodeName: "n1"})
	ob, err := s.GetBlock(ctx, names.BlockName(other.Block))
	if err != nil {
		t.Fatal(err)
	}
	ob.Spec.Allocations["5"] = v1.Allocation{Handle: "net.nohandle", Namespace: "default", Pod: "nohandle", Node: "n1"}
	if _, err := s.UpdateBlock(ctx, ob); err != nil {
		t.Fatal(err)
	}

	res, err := c.RunOnce(ctx)
	if err != nil || len(res.ReleasedIPs)+len(res.DeletedHandles)+len(res.RestoredHandles) != 0 || res.Pending != 3 {
		t.Fatalf("first look must only note candidates: %+v %v", res, err)
	}
	now = now.Add(30 * time.Second)
	res, _ = c.RunOnce(ctx)
	if len(res.ReleasedIPs) != 0 {
		t.Fatal("released within the grace period")
	}
	// The pod comes back in the meantime for one candidate: nothing of it is released.
	s.AddPod(ipam.Pod{Namespace: "default", Name: "gone", NodeName: "n1"})
	now = now.Add(31 * time.Second)
	res, err = c.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ReleasedIPs) != 0 || len(res.DeletedHandles) != 1 || res.DeletedHandles[0] != "net.orphan" || len(res.RestoredHandles) != 1 {
		t.Fatalf("after grace: %+v", res)
	}
	s.DeletePod("default", "gone")
	_, _ = c.RunOnce(ctx)
	now = now.Add(2 * time.Minute)
	res, _ = c.RunOnce(ctx)
	if len(res.ReleasedIPs) != 1 || res.ReleasedIPs[0] != goneIP.IP {
		t.Fatalf("want %v released, got %+v", goneIP.IP, res)
	}
	for _, h := range []string{"net.live", "net.nohandle", names.TunnelHandle("n1")} {
		got, _ := a.Lookup(ctx, h)
		if len(got) != 1 {
			t.Fatalf("%s lost its address", h)
		}
	}
	if h, err := s.GetHandle(ctx, "net.nohandle"); err != nil || h.Spec.Block[other.Block.String()] != 1 {
		t.Fatalf("the borrowed allocation's handle was not restored: %+v %v", h, err)
	}
	if _, err := s.GetHandle(ctx, "net.live"); err == nil {
		t.Fatal("a handle object was written for an address of the node's own block")
	}
	_ = liveIP
	_ = tunnel
	if got, _ := a.Lookup(ctx, "net.gone"); len(got) != 0 {
		t.Fatal("net.gone still holds an address")
	}
	for _, h := range s.Handles() {
		if h.Name == "net.gone" || h.Name == "net.orphan" {
			t.Fatalf("handle %s left", h.Name)
		}
	}
}
