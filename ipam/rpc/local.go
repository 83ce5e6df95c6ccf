package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// NewLocal is the IPAM service over an allocator in this process: what tabby-node serves, and
// what the plugins run themselves when tabby-node does not answer. Every field of api.Service is
// implemented here, by a method of local below.
func NewLocal(alloc *ipam.Allocator) api.Service {
	l := &local{alloc: alloc}
	return api.Service{
		Assign:  l.assign,
		Release: l.release,
		Lookup:  l.lookup,
		Ready:   l.ready,
		GC:      l.gc,
	}
}

type local struct {
	alloc *ipam.Allocator
}

// NewServer is tabby-node's IPAM service over its allocator:
//
//	l, _ := rpc.Listen(api.DefaultSocket)
//	srv := rpc.NewServer(alloc)
//	go srv.Serve(l)
func NewServer(alloc *ipam.Allocator) *Server { return NewServerFor(NewLocal(alloc)) }

func (l *local) assign(ctx context.Context, r *api.AssignRequest) (*api.AssignReply, error) {
	if r.Handle == "" || r.Node == "" {
		return nil, fmt.Errorf("%w: assign needs a handle and a node (handle %q, node %q)", api.ErrInvalid, r.Handle, r.Node)
	}
	wants := []struct {
		fam    ipfamily.Family
		assign string
	}{{ipfamily.IPv4, r.AssignIPv4}, {ipfamily.IPv6, r.AssignIPv6}}
	if !r.MultiFamily {
		wants = wants[:1]
		wants[0].assign = "true"
	}
	reply := &api.AssignReply{}
	var skipped error
	for _, w := range wants {
		if w.assign == "false" {
			continue
		}
		a, err := l.alloc.Assign(ctx, ipam.Request{Family: w.fam, Handle: r.Handle, Node: r.Node, Namespace: r.Namespace, Pod: r.Pod, Pools: r.Pools})
		if err != nil && w.assign == "" && errors.Is(err, ipam.ErrNoPool) {
			// Not asked for explicitly and no pool of the family: a single-stack pod.
			if skipped == nil {
				skipped = fmt.Errorf("%s address: %w", w.fam, err)
			}
			continue
		}
		if err != nil {
			// One handle, every family: nothing of a half-made attachment stays.
			if len(reply.Assignments) > 0 {
				if rerr := l.alloc.ReleaseHandle(context.WithoutCancel(ctx), r.Handle); rerr != nil {
					err = fmt.Errorf("%w (and releasing its other addresses failed: %v)", err, rerr)
				}
			}
			return nil, classify(fmt.Errorf("%s address: %w", w.fam, err))
		}
		reply.Assignments = append(reply.Assignments, fromIPAM(a))
	}
	if len(reply.Assignments) == 0 {
		if skipped == nil {
			return nil, fmt.Errorf("%w: assign_ipv4 and assign_ipv6 are both false", api.ErrInvalid)
		}
		return nil, classify(skipped)
	}
	reply.Assignment = reply.Assignments[0]
	return reply, nil
}

func (l *local) release(ctx context.Context, r *api.ReleaseRequest) (*api.ReleaseReply, error) {
	if r.Handle == "" {
		return nil, fmt.Errorf("%w: release needs a handle", api.ErrInvalid)
	}
	if err := l.alloc.LoadNode(ctx, r.Node); err != nil {
		return nil, classify(err)
	}
	// Lookup first when asked: DEL uses the addresses to find host state left by a vanished
	// netns. It costs a read, so the common DEL does without.
	var held []ipam.Assignment
	if r.WantReleased {
		var err error
		if held, err = l.alloc.Lookup(ctx, r.Handle); err != nil {
			return nil, classify(err)
		}
	}
	if err := l.alloc.ReleaseHeld(ctx, r.Handle, r.Addresses); err != nil {
		return nil, classify(err)
	}
	out := &api.ReleaseReply{}
	for _, a := range held {
		out.Released = append(out.Released, fromIPAM(a))
	}
	return out, nil
}

func (l *local) lookup(ctx context.Context, r *api.LookupRequest) (*api.LookupReply, error) {
	if err := l.alloc.LoadNode(ctx, r.Node); err != nil {
		return nil, classify(err)
	}
	held, err := l.alloc.Lookup(ctx, r.Handle)
	if err != nil {
		return nil, classify(err)
	}
	out := &api.LookupReply{}
	for _, a := range held {
		out.Assignments = append(out.Assignments, fromIPAM(a))
	}
	return out, nil
}

func (l *local) ready(ctx context.Context, r *api.ReadyRequest) (*api.ReadyReply, error) {
	if err := l.alloc.Ready(ctx, r.Node); err != nil {
		return nil, classify(err)
	}
	return &api.ReadyReply{}, nil
}

// gc releases the node's handles of the network that the runtime does not list. Candidates are
// the allocations in blocks that name the node, and the handles annotated with the node (a crash
// between the handle write and the block write of a borrowed address leaves a handle without
// allocation).
func (l *local) gc(ctx context.Context, r *api.GCRequest) (*api.GCReply, error) {
	if r.Node == "" || r.Network == "" {
		return nil, fmt.Errorf("%w: GC needs a node and a network (node %q, network %q)", api.ErrInvalid, r.Node, r.Network)
	}
	keep := make(map[string]bool, len(r.Keep))
	for _, k := range r.Keep {
		keep[k] = true
	}
	prefix := r.Network + "."
	stale := map[string]bool{}
	consider := func(handle string) {
		if strings.HasPrefix(handle, prefix) && !keep[handle] {
			stale[handle] = true
		}
	}
	store := l.alloc.Store()
	blocks, err := store.ListBlocks(ctx)
	if err != nil {
		return nil, classify(fmt.Errorf("GC: list blocks: %w", err))
	}
	for _, b := range blocks {
		for _, al := range b.Spec.Allocations {
			if al.Node == r.Node {
				consider(al.Handle)
			}
		}
	}
	handles, err := store.ListHandles(ctx)
	if err != nil {
		return nil, classify(fmt.Errorf("GC: list handles: %w", err))
	}
	for _, h := range handles {
		if h.Annotations[ipam.AnnotationHandleNode] == r.Node {
			consider(h.Spec.HandleID)
		}
	}
	if err := l.alloc.LoadNode(ctx, r.Node); err != nil {
		return nil, classify(err)
	}
	out := &api.GCReply{}
	var errs []error
	for h := range stale {
		if err := l.alloc.ReleaseHandle(ctx, h); err != nil {
			errs = append(errs, err)
			continue
		}
		out.Released = append(out.Released, h)
	}
	sort.Strings(out.Released)
	if len(errs) > 0 {
		return out, classify(fmt.Errorf("GC released %d of %d handles: %w", len(out.Released), len(stale), errors.Join(errs...)))
	}
	return out, nil
}

func fromIPAM(a ipam.Assignment) api.Assignment {
	// IPIP for a plugin that predates Overhead (one still running on the node as its agent
	// restarts): it then leaves IPIP's 20 bytes for any encapsulation, less than VXLAN needs but
	// not nothing.
	return api.Assignment{IP: a.IP, Block: a.Block, Pool: a.Pool, Overhead: a.Overhead, IPIP: a.Overhead > 0, Borrowed: a.Borrowed}
}

// classify wraps an allocator error with its kind, told by the allocator's sentinels.
func classify(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case isUnreachable(err):
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	case errors.Is(err, ipam.ErrPoolExhausted):
		return fmt.Errorf("%w: %v", api.ErrExhausted, err)
	case errors.Is(err, ipam.ErrNoPool):
		return fmt.Errorf("%w: %v", api.ErrNoPool, err)
	case errors.Is(err, ipam.ErrInvalidRequest):
		return fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	return err
}

// isUnreachable: the API server could not be reached or did not answer in time.
func isUnreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsUnexpectedServerError(err)
}
