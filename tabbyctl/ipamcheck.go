package tabbyctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/ipam"
)

// problem is one line of `ipam check`.
type problem struct {
	kind   string // short class, e.g. "allocation without a live pod"
	detail string
}

func (p problem) String() string { return p.kind + ": " + p.detail }

// Problem classes of `ipam check`.
const (
	leakedAllocation     = "allocation without a live pod"
	podWithoutAlloc      = "pod without an allocation"
	duplicateIP          = "duplicate IP"
	blockOfDeletedNode   = "block of a deleted node"
	affinityOfDeleted    = "affinity of a deleted node"
	handleMismatch       = "handle mismatch"
	handleWithoutAlloc   = "handle without allocation"
	overlappingBlocks    = "overlapping blocks"
	blockOutsidePools    = "block outside every pool"
	affinityWithoutBlock = "affinity without a block"
	invalidBlock         = "invalid block"
)

// problems turns ipam.Check's report into lines, sorted by class then detail.
func problems(r ipam.CheckReport) []problem {
	var out []problem
	add := func(kind, format string, args ...any) {
		out = append(out, problem{kind: kind, detail: fmt.Sprintf(format, args...)})
	}
	for _, o := range r.WithoutPod {
		add(leakedAllocation, "%s (block %s, handle %s) is allocated to pod %s/%s, which does not exist", o.IP, o.Block, o.Handle, o.Namespace, o.Pod)
	}
	for _, w := range r.WrongPod {
		add(leakedAllocation, "%s (block %s, handle %s) is allocated to pod %s/%s, which has address %s", w.IP, w.Block, w.Handle, w.Namespace, w.Pod, w.PodIPs[0])
	}
	for _, o := range r.TunnelsOfDeletedNodes {
		t, node, _ := ipam.TunnelOf(o.Handle)
		add(leakedAllocation, "%s (block %s) is the %s tunnel address of Node %s, which does not exist", o.IP, o.Block, t.Name, node)
	}
	for _, p := range r.PodsWithoutAllocation {
		add(podWithoutAlloc, "pod %s/%s has address %s, which is not allocated", p.Namespace, p.Name, p.IP)
	}
	for i := 0; i < len(r.DuplicateIPs); {
		j := i + 1
		for j < len(r.DuplicateIPs) && r.DuplicateIPs[j].IP == r.DuplicateIPs[i].IP {
			add(duplicateIP, "%s is allocated in block %s and in block %s", r.DuplicateIPs[i].IP, r.DuplicateIPs[i].Block, r.DuplicateIPs[j].Block)
			j++
		}
		i = j
	}
	for _, d := range r.DuplicatePodIPs {
		add(duplicateIP, "%s is the address of %d live pods: %s", d.IP, len(d.Pods), strings.Join(d.Pods, ", "))
	}
	for _, b := range r.BlocksOfDeletedNodes {
		add(blockOfDeletedNode, "block %s has affinity host:%s but Node %s does not exist (%d addresses allocated)", b.CIDR, b.Node, b.Node, b.InUse)
	}
	for _, af := range r.AffinitiesOfDeletedNodes {
		add(affinityOfDeleted, "BlockAffinity %s claims block %s for Node %s, which does not exist", af.Name, af.CIDR, af.Node)
	}
	seen := map[string]bool{}
	for _, o := range r.WithoutHandle {
		if !seen[o.Handle] {
			seen[o.Handle] = true
			add(handleMismatch, "allocations with handle %s exist but no IPAMHandle records it", o.Handle)
		}
	}
	for _, m := range r.HandleMismatches {
		add(handleMismatch, "IPAMHandle %s counts %d addresses in block %s, the block holds %d", m.Name, m.Counted, m.Block, m.Held)
	}
	for _, h := range r.HandlesWithoutAllocation {
		add(handleWithoutAlloc, "handle %s holds no address", h)
	}
	for _, pair := range r.OverlappingBlocks {
		add(overlappingBlocks, "block %s overlaps block %s", pair[1], pair[0])
	}
	for _, c := range r.BlocksOutsidePools {
		add(blockOutsidePools, "block %s is in no IPPool", c)
	}
	for _, name := range r.AffinitiesWithoutBlock {
		add(affinityWithoutBlock, "BlockAffinity %s claims a block that does not exist", name)
	}
	for _, why := range r.InvalidBlocks {
		add(invalidBlock, "%s", why)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].detail < out[j].detail
	})
	return out
}

// errInUse is returned when a live Pod still uses the address and force is off.
type errInUse struct {
	ip   netip.Addr
	pods []string
}

func (e *errInUse) Error() string {
	return fmt.Sprintf("%s is in use by live pod %v: refusing to release it (a second pod would get the same address); use --force if you are sure", e.ip, e.pods)
}

// running tells whether a pod may be using its addresses (the same rule as ipam.Check's).
func running(p *ipam.Pod) bool { return !p.HostNetwork && !p.Terminated && !p.Deleting }

// releaseIP frees one address: the block's allocation goes, and its handle's count drops (the
// handle goes with its last address). Unless force is set it refuses an address a live Pod uses.
func releaseIP(ctx context.Context, store ipam.Store, ip netip.Addr, force bool) (ipam.Owner, error) {
	o, err := ipam.WhoHas(ctx, store, ip)
	if errors.Is(err, ipam.ErrNotAllocated) {
		return o, fmt.Errorf("release %s: %s", ip, ownerText(o, false))
	}
	if err != nil {
		return o, fmt.Errorf("release %s: %w", ip, err)
	}
	if !force {
		pods, err := store.ListPods(ctx, "")
		if err != nil {
			return o, fmt.Errorf("release %s: list pods: %w", ip, err)
		}
		var users []string
		for i := range pods {
			if running(&pods[i]) && slices.Contains(pods[i].IPs, ip) {
				users = append(users, pods[i].Namespace+"/"+pods[i].Name)
			}
		}
		if o.Pod != "" && len(users) == 0 {
			// Its pod may not have reported an address yet.
			p, err := store.GetPod(ctx, o.Namespace, o.Pod)
			if err != nil && !apierrors.IsNotFound(err) {
				return o, fmt.Errorf("release %s: check pod %s/%s: %w", ip, o.Namespace, o.Pod, err)
			}
			if err == nil && running(p) && (len(p.IPs) == 0 || slices.Contains(p.IPs, ip)) {
				users = append(users, o.Namespace+"/"+o.Pod)
			}
		}
		if len(users) > 0 {
			sort.Strings(users)
			return o, &errInUse{ip: ip, pods: users}
		}
	}
	// The write is the IPAM library's: the same compare-and-swap sequence (block first, then the
	// handle) tabby-node and the CNI plugin use, so a concurrent ADD/DEL is never overwritten.
	alloc := ipam.New(store, ipam.Config{Logger: slog.New(slog.DiscardHandler)})
	if err := alloc.ReleaseIP(ctx, ip); err != nil {
		return o, err
	}
	return o, nil
}
