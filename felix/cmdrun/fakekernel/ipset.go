//lint:file-ignore ST1005 the fake answers with the messages iptables and ipset print, capitals and all

package fakekernel

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

type ipset struct {
	typ, family string
	maxelem     int
	members     map[string]string // element -> "nomatch" or ""
}

// Set is one ipset as the fake kernel holds it.
type Set struct {
	Type, Family string
	Members      []string // sorted, as ipset save prints them ("10.0.0.0/24 nomatch")
}

// Sets returns every set.
func (k *Kernel) Sets() map[string]Set {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]Set{}
	for n, s := range k.sets {
		out[n] = Set{Type: s.typ, Family: s.family, Members: s.list()}
	}
	return out
}

func (s *ipset) list() []string {
	var out []string
	for _, e := range slices.Sorted(maps.Keys(s.members)) {
		if f := s.members[e]; f != "" {
			e += " " + f
		}
		out = append(out, e)
	}
	return out
}

func (k *Kernel) ipsetCommand(c Call) (string, string, int) {
	args := c.Args
	if len(args) == 0 {
		return "", "ipset v7.17: No command specified", 1
	}
	switch args[0] {
	case "--version", "version":
		return "ipset v7.17, protocol version: 7\n", "", 0
	case "save":
		return k.ipsetSave(args[1:]), "", 0
	case "list":
		if len(args) == 2 && args[1] == "-n" {
			var b strings.Builder
			for _, n := range slices.Sorted(maps.Keys(k.sets)) {
				b.WriteString(n + "\n")
			}
			return b.String(), "", 0
		}
		return "", "ipset v7.17: only list -n is modelled", 1
	case "restore":
		for i, line := range strings.Split(c.Stdin, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(f[0], "#") {
				continue
			}
			if f[0] == "COMMIT" {
				continue
			}
			if err := k.ipsetOp(f); err != nil {
				return "", fmt.Sprintf("ipset v7.17: Error in line %d: %v", i+1, err), 1
			}
		}
		return "", "", 0
	}
	if err := k.ipsetOp(args); err != nil {
		return "", "ipset v7.17: " + err.Error(), 1
	}
	return "", "", 0
}

func (k *Kernel) ipsetSave(names []string) string {
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(k.sets))
	}
	var b strings.Builder
	for _, n := range names {
		s, ok := k.sets[n]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "create %s %s family %s hashsize 1024 maxelem %d bucketsize 12 initval 0x12345678\n", n, s.typ, s.family, s.maxelem)
		for _, m := range s.list() {
			fmt.Fprintf(&b, "add %s %s\n", n, m)
		}
	}
	return b.String()
}

var errNoSet = errors.New("The set with the given name does not exist")

// ipsetOp applies one ipset command (create, add, del, destroy, swap, flush).
func (k *Kernel) ipsetOp(f []string) error {
	exist := slices.Contains(f, "-exist") || slices.Contains(f, "-!")
	f = slices.DeleteFunc(slices.Clone(f), func(s string) bool { return s == "-exist" || s == "-!" })
	if len(f) < 2 {
		return errors.New("Syntax error: missing set name")
	}
	op, name := f[0], f[1]
	s, ok := k.sets[name]
	switch op {
	case "create", "-N", "n":
		if len(f) < 3 || !strings.HasPrefix(f[2], "hash:") {
			return errors.New("Syntax error: only hash types are modelled")
		}
		ns := &ipset{typ: f[2], family: "inet", maxelem: 65536, members: map[string]string{}}
		for i := 3; i+1 < len(f); i++ {
			switch f[i] {
			case "family":
				ns.family = f[i+1]
			case "maxelem":
				ns.maxelem, _ = strconv.Atoi(f[i+1])
			}
		}
		if ok {
			if exist && s.typ == ns.typ && s.family == ns.family {
				return nil
			}
			return errors.New("Set cannot be created: set with the same name already exists")
		}
		k.sets[name] = ns
	case "add", "-A", "a", "del", "-D", "d":
		if !ok {
			return errNoSet
		}
		if len(f) < 3 {
			return errors.New("Syntax error: missing element")
		}
		elem, err := s.element(f[2])
		if err != nil {
			return err
		}
		flags := ""
		if slices.Contains(f[3:], "nomatch") {
			if !strings.Contains(s.typ, "net") {
				return errors.New("Syntax error: nomatch is only for net types")
			}
			flags = "nomatch"
		}
		_, has := s.members[elem]
		if op == "add" || op == "-A" || op == "a" {
			if has && !exist {
				return errors.New("Element cannot be added to the set: it's already added")
			}
			if !has && len(s.members) >= s.maxelem {
				return errors.New("Hash is full, cannot add more elements")
			}
			s.members[elem] = flags
			return nil
		}
		if !has {
			if exist {
				return nil
			}
			return errors.New("Element cannot be deleted from the set: it's not added")
		}
		delete(s.members, elem)
	case "destroy", "-X", "x":
		if !ok {
			return errNoSet
		}
		if k.inUse[name] > 0 || k.usesSet(name) {
			if k.inUse[name] > 0 {
				k.inUse[name]--
			}
			return errors.New("Set cannot be destroyed: it is in use by a kernel component")
		}
		delete(k.sets, name)
	case "swap", "-W", "w":
		if len(f) < 3 {
			return errors.New("Syntax error: swap needs two sets")
		}
		o, ok2 := k.sets[f[2]]
		if !ok || !ok2 {
			return errNoSet
		}
		if s.typ != o.typ || s.family != o.family {
			return errors.New("The sets cannot be swapped: their type does not match")
		}
		k.sets[name], k.sets[f[2]] = o, s
	case "flush", "-F", "f":
		if !ok {
			return errNoSet
		}
		s.members = map[string]string{}
	default:
		return fmt.Errorf("Syntax error: command %s is not modelled", op)
	}
	return nil
}

// element parses a member as the kernel stores it: addresses in their short form, a host net
// without its length, a port with its protocol.
func (s *ipset) element(e string) (string, error) {
	dims := strings.Split(strings.TrimPrefix(s.typ, "hash:"), ",")
	parts := strings.Split(e, ",")
	if len(parts) != len(dims) {
		return "", fmt.Errorf("Syntax error: %s is not a %s element", e, s.typ)
	}
	bits := 32
	if s.family == "inet6" {
		bits = 128
	}
	for i, d := range dims {
		p := parts[i]
		switch d {
		case "ip", "net":
			var pfx netip.Prefix
			var err error
			if strings.Contains(p, "/") {
				pfx, err = netip.ParsePrefix(p)
			} else {
				var a netip.Addr
				if a, err = netip.ParseAddr(p); err == nil {
					pfx = netip.PrefixFrom(a, a.BitLen())
				}
			}
			if err != nil {
				return "", fmt.Errorf("Syntax error: cannot parse %s: resolving to IP address failed", p)
			}
			if pfx.Addr().BitLen() != bits {
				return "", fmt.Errorf("Syntax error: %s is not an address of family %s", p, s.family)
			}
			pfx = pfx.Masked()
			switch {
			case pfx.Bits() == bits:
				p = pfx.Addr().String()
			case d == "ip":
				return "", fmt.Errorf("Syntax error: ranges of %s are not modelled", p)
			case pfx.Bits() == 0:
				return "", errors.New("The value of the CIDR parameter of the IP address is invalid")
			default:
				p = pfx.String()
			}
		case "port":
			proto, port, ok := strings.Cut(p, ":")
			if !ok {
				proto, port = "tcp", p
			}
			n, err := strconv.ParseUint(port, 10, 16)
			if err != nil {
				return "", fmt.Errorf("Syntax error: '%s' is invalid as number", port)
			}
			p = strings.ToLower(proto) + ":" + strconv.FormatUint(n, 10)
		}
		parts[i] = p
	}
	return strings.Join(parts, ","), nil
}
