package felix

import "context"

// Manager is one part of the dataplane, as in Calico Felix. The loop hands every manager every
// message (felix's input, OnUpdate, and the kernel's events: routetable.LinkUpdate,
// LinksResync, HostRoutesUpdate); a manager keeps what concerns it and marks itself dirty only
// when its desired state changed. CompleteDeferredWork then computes what to write and hands it
// to the shared writers (see Writers): the route table, where each manager states the routes of
// its own class, and the iptables tables and the ipsets of each family, which felix applies
// once for all managers, in the order the kernel needs:
//
//	ipsets: create and fill → iptables: one iptables-restore per table → ipsets: destroy stale
//	→ routes
//
// so no rule ever names a set that is not there yet, and no set is destroyed while a rule
// still uses it. A manager never writes routes, rules or sets itself; that keeps its decision
// logic testable with fake writers and makes one datastore event one batch, not one batch per
// manager. What has no shared writer (tunl0, sysctls) its manager applies in
// CompleteDeferredWork.
type Manager interface {
	// OnUpdate records desired state from msg; messages a manager does not know are ignored.
	OnUpdate(msg any)
	// CompleteDeferredWork pushes what changed since the last call into the writers. resync
	// means the writers have re-read the kernel and the manager must state everything again.
	CompleteDeferredWork(ctx context.Context, resync bool) error
}
