// Package api is the contract of tabby's IPAM service: the Service (one typed field per method),
// its messages, its error kinds, and the transports that carry a call to where it runs. It is
// kept free of Kubernetes client code on purpose: the tabby CNI binary imports it, and every
// package linked into that binary is paid for at each exec (client-go's init alone costs more
// than the rest of an ADD).
//
// A Service is reached the same way whichever side it runs on:
//
//	svc := api.Connect(transport) // every method over a Transport
//	r, err := svc.Assign(ctx, &api.AssignRequest{...})
//
// The transports are tabby-node's unix socket (Dial; served by ipam/rpc's Server), the tabby
// plugin's exec of tabby-ipam (cni-plugin/ipamclient), and this process (InProcess, over
// ipam/rpc.NewLocal: the allocator itself). They carry every field of Service by its name, so
// none of them changes when a method is added.
//
// # Adding a method
//
// Say Drain, which releases what a node holds. Here, in this file: its messages, and its field
// in Service.
//
//	type DrainRequest struct {
//		Node string `json:"node"`
//	}
//	type DrainReply struct {
//		Released []string `json:"released,omitempty"`
//	}
//	// in Service:
//	// Drain releases what a node holds.
//	Drain Func[DrainRequest, DrainReply]
//
// In ipam/rpc/local.go: its implementation, and its entry in NewLocal's Service literal. Its
// errors wrap one kind of errors.go (classify does it for the allocator's sentinels): the kind
// crosses every transport, and cni-plugin/cnierr maps it to a CNI error code.
//
//	func (l *local) drain(ctx context.Context, r *api.DrainRequest) (*api.DrainReply, error) {
//		...
//	}
//	// in NewLocal:
//	Drain: l.drain,
//
// Then call it on any Service. The plugins' (ipamclient.Conn) tries tabby-node's socket and
// falls back to the direct path by itself:
//
//	r, err := inv.ipam.Drain(ctx, &api.DrainRequest{Node: node})
//
// Nothing else: no client, server, dispatch, fallback or exec code. The contract and the
// implementation are two files because they are the two sides of the socket: this package is
// linked into the CNI binary, the implementation needs the allocator and the Kubernetes client.
// ipam/rpc's TestLocalImplementsEveryMethod fails while a field of Service has no
// implementation; api's TestEveryMethodCrossesTheSocket carries the new one without being told.
//
// On the wire (wire.go) a call is one line of JSON and its reply another.
package api

import (
	"net/netip"
)

// DefaultSocket is where tabby-node serves IPAM and where the CNI plugins look for it.
const DefaultSocket = "/var/run/tabby/ipam.sock"

// Service is what the plugins need from IPAM: a field per method, named as on the wire. Every
// field is a Func; a nil one is a method this side does not implement (its callers get
// ErrInvalid).
type Service struct {
	// Assign gives a container attachment its addresses, one per family; idempotent by handle.
	Assign Func[AssignRequest, AssignReply]
	// Release gives back every address of a handle; releasing nothing is not an error.
	Release Func[ReleaseRequest, ReleaseReply]
	// Lookup lists the addresses a handle holds.
	Lookup Func[LookupRequest, LookupReply]
	// Ready fails when no address could be allocated on the node now.
	Ready Func[ReadyRequest, ReadyReply]
	// GC releases a node's handles of a network that the runtime no longer lists.
	GC Func[GCRequest, GCReply]
}

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
	// Overhead is what the pool's encapsulation adds to packets from other nodes to this
	// address (ipam.EncapOverhead: 20 for IPIP, 50 for VXLAN over IPv4, 70 over IPv6; 0: none),
	// so the pod's MTU leaves room for it.
	Overhead int `json:"overhead,omitempty"`
	// IPIP is what an agent that predates Overhead says instead: the pool encapsulates in IPIP.
	// Read (EncapOverhead) and written (for any encapsulation) for one release, so that a plugin
	// and an agent of two releases still agree while a node upgrades.
	IPIP     bool `json:"ipip,omitempty"`
	Borrowed bool `json:"borrowed,omitempty"`
}

// ipipOverhead is ipam.IPIPOverhead, which this package cannot import (see the package doc).
const ipipOverhead = 20

// EncapOverhead is what the pod's MTU must leave room for on this address: Overhead, or from an
// agent that predates it, IPIP's outer header when it says IPIP.
func (a Assignment) EncapOverhead() int {
	if a.Overhead == 0 && a.IPIP {
		return ipipOverhead
	}
	return a.Overhead
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
