package ipam_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// A block whose allocations the allocator cannot have written is reported by the check.
func TestCheckReportsInvalidBlocks(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	if _, err := s.CreateBlock(ctx, &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "10-244-0-0-26"}, Spec: v1.IPAMBlockSpec{CIDR: "10.244.0.0/26",
		Allocations: map[string]v1.Allocation{"5": {Handle: "h"}, "64": {Handle: "h"}}}}); err != nil {
		t.Fatal(err)
	}
	r, err := ipam.Check(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.InvalidBlocks) != 1 || !strings.Contains(r.InvalidBlocks[0], `IPAMBlock 10-244-0-0-26: spec.allocations: allocation key "64" is outside the block`) || r.Problems() == 0 {
		t.Fatalf("check: invalid blocks %q, %d problems", r.InvalidBlocks, r.Problems())
	}
}
