package model

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// BGPFilter is a BGPFilter as bird reads it, parsed once (validation.ParseBGPFilter): its
// import and export rules, each list in order, IPv4's rules before IPv6's (a rule only ever
// matches routes of its own family, so the two lists never meet).
type BGPFilter struct {
	Name   string
	Import []FilterRule
	Export []FilterRule
}

// FilterRule is one rule of a BGPFilter.
type FilterRule struct {
	Family ipfamily.Family
	Accept bool // else Reject
	// Prefix invalid: the rule matches every route of Family. Else a route matches when its
	// prefix lies inside Prefix with a length in MinLen..MaxLen (Equal: Prefix itself), or,
	// with Negate, when it does not.
	Prefix         netip.Prefix
	MinLen, MaxLen uint8
	Negate         bool
	// RemotePeers: only routes learned from a peer match (export rules), not this node's own.
	RemotePeers bool
}

// Equal compares two filters.
func (f BGPFilter) Equal(o BGPFilter) bool {
	return f.Name == o.Name && slices.Equal(f.Import, o.Import) && slices.Equal(f.Export, o.Export)
}

// PrefixCommunities are the communities tabby puts on its own routes equal to or inside Prefix
// (BGPConfiguration prefixAdvertisements, names resolved): Standard aa:nn, Large aa:nn:mm.
type PrefixCommunities struct {
	Prefix   netip.Prefix
	Standard []string
	Large    []string
	// LocalPref, when set, is the LOCAL_PREF of these routes towards external routers.
	LocalPref *uint32
}

// Equal compares two.
func (p PrefixCommunities) Equal(o PrefixCommunities) bool {
	return p.Prefix == o.Prefix && slices.Equal(p.Standard, o.Standard) && slices.Equal(p.Large, o.Large) &&
		(p.LocalPref == nil) == (o.LocalPref == nil) && (p.LocalPref == nil || *p.LocalPref == *o.LocalPref)
}
