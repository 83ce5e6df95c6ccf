package routetable

import "github.com/tabbynet/tabby/felix/calc"

// The messages below are the kernel's side of felix's managers' input: felix's loop hands them
// to every manager, beside the datastore's changes, when the netlink subscription or a resync
// of this table tells it something changed.

// LinkUpdate: an interface appeared or changed (Gone false), or went.
type LinkUpdate struct {
	Name  string
	Index int
	Gone  bool
}

// LinksResync: the kernel was read again (events may have been lost): every interface now, by
// name.
type LinksResync struct{ Links map[string]int }

// HostRoutesUpdate: the host's own routes (not tabby's), which next hops resolve through, after
// one of them changed. Receivers must not modify the slice.
type HostRoutesUpdate struct{ Routes []calc.HostRoute }
