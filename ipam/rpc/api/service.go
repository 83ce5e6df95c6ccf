// Package api is the contract of tabby-node's IPAM service (ipam/rpc): messages, the Service
// interface, the error kinds, and the unix-socket Client. It is kept free of Kubernetes client
// code on purpose: the tabby CNI binary imports it, and every package linked into that binary is
// paid for at each exec (client-go's init alone cost ~10 ms per invocation, measured).
//
// The wire format is newline-delimited JSON (wire.go).
package api

import (
	"context"
	"net/netip"
)

// DefaultSocket is where tabby-node serves IPAM and where the CNI plugins look for it.
const DefaultSocket = "/var/run/tabby/ipam.sock"

// AssignRequest asks for the addresses of a container attachment: one per family.
type AssignRequest struct {
	// Handle is "<network>.<containerID>": the key that makes Assign idempotent and that
	// Release and GC work by.
	Handle    string   `json:"handle"`
	Node      string   `json:"node"`
	Namespace string   `json:"namespace,omitempty"`
	Pod       string   `json:"pod,omitempty"`
	Pools     []string `json:"pools,omitempty"` // pool names or CIDRs to choose from; empty = all usable
	// AssignIPv4 and AssignIPv6 are the CNI IPAM config's assign_ipv4 / assign_ipv6: "true"
	// forces the family, "false" skips it, "" assigns it when a usable pool of the family exists.
	AssignIPv4 string `json:"assignIPv4,omitempty"`
	AssignIPv6 string `json:"assignIPv6,omitempty"`
	// MultiFamily says the client reads AssignReply.Assignments. A request without it comes
	// from a plugin binary that predates dual stack (a node upgraded agent first): it gets its
	// IPv4 address or IPv4's error and nothing else, so no IPv6 address is held that the pod
	// would never be given.
	MultiFamily bool `json:"multiFamily,omitempty"`
}

// Assignment is one address held by a handle.
type Assignment struct {
	IP    netip.Addr   `json:"ip"`
	Block netip.Prefix `json:"block"`
	Pool  string       `json:"pool"`
	// IPIP: traffic from other nodes to this address may arrive IPIP-encapsulated (the pool's
	// model.Pool.IPIP), so the pod's MTU leaves room for the outer IPv4 header.
	IPIP     bool `json:"ipip,omitempty"`
	Borrowed bool `json:"borrowed,omitempty"`
}

// AssignReply carries the assignment.
type AssignReply struct {
	// Assignment is the first of Assignments (the IPv4 one when there is one), for a plugin
	// binary that predates dual stack.
	Assignment Assignment `json:"assignment"`
	// Assignments holds one address per assigned family, IPv4 first.
	Assignments []Assignment `json:"assignments,omitempty"`
}

// All is every assignment of the reply, also from a tabby-node that predates dual stack.
func (r *AssignReply) All() []Assignment {
	if len(r.Assignments) > 0 {
		return r.Assignments
	}
	if r.Assignment.IP.IsValid() {
		return []Assignment{r.Assignment}
	}
	return nil
}

// ReleaseRequest releases every address of a handle.
type ReleaseRequest struct {
	Handle string `json:"handle"`
	// Node is where the container ran: its blocks are searched too, for an address whose
	// IPAMHandle is not written yet (ipam/handles.go). Optional.
	Node string `json:"node,omitempty"`
	// Addresses are the attachment's addresses as the runtime's prevResult lists them: when
	// none is borrowed, the release skips reading the handle object, which exists only for a
	// borrowed address (ipam.Allocator.ReleaseHeld). Optional.
	Addresses []netip.Addr `json:"addresses,omitempty"`
	// WantReleased asks for the addresses released (one more read); DEL needs them only when the
	// container's netns is already gone.
	WantReleased bool `json:"wantReleased,omitempty"`
}

// ReleaseReply says what was released, so DEL can remove host state that points at those
// addresses even when the container's netns is already gone.
type ReleaseReply struct {
	Released []Assignment `json:"released,omitempty"`
}

// LookupRequest asks which addresses a handle holds.
type LookupRequest struct {
	Handle string `json:"handle"`
	// Node: as in ReleaseRequest.
	Node string `json:"node,omitempty"`
}

// LookupReply lists them (empty when the handle holds nothing).
type LookupReply struct {
	Assignments []Assignment `json:"assignments,omitempty"`
}

// ReadyRequest asks whether an address could be allocated on a node now.
type ReadyRequest struct {
	Node string `json:"node"`
}

// ReadyReply is empty: readiness is the absence of an error.
type ReadyReply struct{}

// GCRequest releases a node's allocations of one network whose container is not listed.
type GCRequest struct {
	Node    string `json:"node"`
	Network string `json:"network"`
	// Keep are the handles (<network>.<containerID>) the runtime still knows about.
	Keep []string `json:"keep,omitempty"`
}

// GCReply lists the handles released.
type GCReply struct {
	Released []string `json:"released,omitempty"`
}

// Service is what the plugins need from IPAM, whichever way it is reached: the unix-socket
// Client, rpc.Local (an allocator in the caller's process), or the plugins' exec fallback.
type Service interface {
	Assign(ctx context.Context, r *AssignRequest) (*AssignReply, error)
	Release(ctx context.Context, r *ReleaseRequest) (*ReleaseReply, error)
	Lookup(ctx context.Context, r *LookupRequest) (*LookupReply, error)
	Ready(ctx context.Context, r *ReadyRequest) (*ReadyReply, error)
	GC(ctx context.Context, r *GCRequest) (*GCReply, error)
}
