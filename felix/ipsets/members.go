package ipsets

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// dims are the parts of one member of a set type: "hash:ip,port" has an ip and a port.
func dims(typ string) ([]string, error) {
	kind, spec, ok := strings.Cut(typ, ":")
	if !ok || kind != "hash" || spec == "" {
		return nil, fmt.Errorf("set type %q: only hash:… types are supported", typ)
	}
	ds := strings.Split(spec, ",")
	for _, d := range ds {
		switch d {
		case "ip", "net", "port", "mark", "iface", "mac":
		default:
			return nil, fmt.Errorf("set type %q: unknown part %q", typ, d)
		}
	}
	return ds, nil
}

// normalizeMember returns a member as `ipset save` prints it, split into the element (the
// set's key) and its flags ("nomatch" or ""): host nets without their /32, prefixes masked,
// IPv6 compressed, a port with its protocol ("10.0.0.1,80" is "10.0.0.1,tcp:80"). strict
// refuses what tabby never writes (ranges, timeouts); the kernel's own listing is read with
// strict off.
func normalizeMember(ds []string, fam ipfamily.Family, member string, strict bool) (elem, flags string, err error) {
	fields := strings.Fields(member)
	if len(fields) == 0 {
		return "", "", fmt.Errorf("member %q: empty", member)
	}
	for _, f := range fields[1:] {
		switch {
		case f == "nomatch" && contains(ds, "net"):
			flags = "nomatch"
		case strict:
			return "", "", fmt.Errorf("member %q: option %q is not supported", member, f)
		}
	}
	parts := strings.Split(fields[0], ",")
	if len(parts) != len(ds) {
		return "", "", fmt.Errorf("member %q: want %d comma-separated parts (%s)", member, len(ds), strings.Join(ds, ","))
	}
	for i, d := range ds {
		p := parts[i]
		switch d {
		case "ip", "net":
			p, err = normalizeAddr(p, fam, d == "net")
		case "port":
			p, err = normalizePort(p)
		}
		if err != nil {
			return "", "", fmt.Errorf("member %q: %w", member, err)
		}
		parts[i] = p
	}
	return strings.Join(parts, ","), flags, nil
}

func contains(ds []string, d string) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

func normalizeAddr(s string, fam ipfamily.Family, isNet bool) (string, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return "", err
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmapBits(p.Addr())).Masked()
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return "", err
		}
		p = ipfamily.HostPrefix(a)
	}
	if got := ipfamily.OfPrefix(p); got != fam {
		return "", fmt.Errorf("%s is %s in an %s set", s, got, fam)
	}
	if p.Bits() == fam.Bits() {
		return p.Addr().String(), nil
	}
	if !isNet {
		return "", fmt.Errorf("%s: a prefix in a set of addresses", s)
	}
	if p.Bits() == 0 {
		// The kernel's hash:net refuses /0; split it into two halves (Calico does the same).
		return "", fmt.Errorf("%s: a hash:net cannot hold /0; use two /1 halves", s)
	}
	return p.String(), nil
}

func unmapBits(a netip.Addr) int {
	if a.Is4In6() {
		return 96
	}
	return 0
}

func normalizePort(s string) (string, error) {
	proto, port, ok := strings.Cut(s, ":")
	if !ok {
		proto, port = "tcp", s
	}
	proto = strings.ToLower(proto)
	switch proto {
	case "tcp", "udp", "sctp", "udplite":
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			// Service names are resolved by ipset and then printed as numbers: a name here
			// would never compare equal with the kernel's listing.
			return "", fmt.Errorf("port %q: want a number", port)
		}
		return proto + ":" + strconv.FormatUint(n, 10), nil
	}
	return proto + ":" + port, nil
}
