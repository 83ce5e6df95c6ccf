package felix

import "context"

// Manager is one part of the dataplane, as in Calico Felix. The loop hands every manager every
// update; a manager keeps what concerns it and marks itself dirty only when its desired state
// changed. CompleteDeferredWork then computes what to write and hands it to the shared writers
// (the iptables tables and the ipsets of each family), which felix applies once for all
// managers, in the order the kernel needs:
//
//	ipsets: create and fill → iptables: one iptables-restore per table → ipsets: destroy stale
//
// so no rule ever names a set that is not there yet, and no set is destroyed while a rule
// still uses it. A manager never runs commands itself; that keeps its decision logic testable
// with fake writers and makes one datastore event one batch, not one batch per manager.
//
// The route table and the tunnel are older than this interface and keep their own apply path
// (netlink, not iptables); new dataplane state (policy, NAT, and IPv6's per-family parts) is
// built as managers.
type Manager interface {
	// OnUpdate records desired state from msg; messages a manager does not know are ignored.
	OnUpdate(msg any)
	// CompleteDeferredWork pushes what changed since the last call into the writers. resync
	// means the writers have re-read the kernel and the manager must state everything again.
	CompleteDeferredWork(ctx context.Context, resync bool) error
}
