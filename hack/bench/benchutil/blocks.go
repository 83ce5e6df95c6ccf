package benchutil

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
)

// ClaimBlock writes a block the way IPAM claims one: a pending BlockAffinity, the IPAMBlock with the
// node's affinity, then the affinity confirmed. t0 is taken just before the IPAMBlock write:
// the block's affinity appears in the datastore inside that call.
func ClaimBlock(ctx context.Context, l *lab.Lab, node string, b netip.Prefix) (t0 time.Time, createTook time.Duration, err error) {
	aff := &v1.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: names.AffinityName(node, b)},
		Spec: v1.BlockAffinitySpec{Node: node, CIDR: b.String(), State: v1.AffinityPending}}
	if aff, err = l.Client.BlockAffinities().Create(ctx, aff); err != nil {
		return t0, 0, fmt.Errorf("create BlockAffinity %s: %w", names.AffinityName(node, b), err)
	}
	blk := &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(b)},
		Spec: v1.IPAMBlockSpec{CIDR: b.String(), Affinity: v1.AffinityPrefixHost + node}}
	t0 = time.Now()
	if _, err = l.Client.IPAMBlocks().Create(ctx, blk); err != nil {
		return t0, 0, fmt.Errorf("create IPAMBlock %s: %w", names.BlockName(b), err)
	}
	createTook = time.Since(t0)
	aff.Spec.State = v1.AffinityConfirmed
	if _, err = l.Client.BlockAffinities().Update(ctx, aff); err != nil {
		return t0, createTook, fmt.Errorf("confirm BlockAffinity %s: %w", aff.Name, err)
	}
	return t0, createTook, nil
}

// ReleaseBlock deletes the block, then its affinity.
func ReleaseBlock(ctx context.Context, l *lab.Lab, node string, b netip.Prefix) error {
	if err := DeleteBlock(ctx, l, b); err != nil {
		return err
	}
	if err := l.Client.BlockAffinities().Delete(ctx, names.AffinityName(node, b), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete BlockAffinity %s: %w", names.AffinityName(node, b), err)
	}
	return nil
}

// DeleteBlock deletes the IPAMBlock of b (a block already gone is fine).
func DeleteBlock(ctx context.Context, l *lab.Lab, b netip.Prefix) error {
	if err := l.Client.IPAMBlocks().Delete(ctx, names.BlockName(b), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete IPAMBlock %s: %w", names.BlockName(b), err)
	}
	return nil
}
