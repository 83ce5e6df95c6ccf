package validation

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// ParseBGPFilter validates a BGPFilter and returns it parsed: the one place a filter's spec is
// read. Every error names its field and value.
func ParseBGPFilter(f *v1.BGPFilter) (model.BGPFilter, field.ErrorList) {
	spec := field.NewPath("spec")
	out := model.BGPFilter{Name: f.Name}
	var errs field.ErrorList
	for _, l := range []struct {
		name   string
		rules  []ruleFields
		fam    ipfamily.Family
		export bool
	}{
		{"importV4", rules4(f.Spec.ImportV4), ipfamily.IPv4, false}, {"importV6", rules6(f.Spec.ImportV6), ipfamily.IPv6, false},
		{"exportV4", rules4(f.Spec.ExportV4), ipfamily.IPv4, true}, {"exportV6", rules6(f.Spec.ExportV6), ipfamily.IPv6, true},
	} {
		for i, r := range l.rules {
			rule, es := parseFilterRule(spec.Child(l.name).Index(i), r, l.fam, l.export)
			errs = append(errs, es...)
			if l.export {
				out.Export = append(out.Export, rule)
			} else {
				out.Import = append(out.Import, rule)
			}
		}
	}
	if len(errs) > 0 {
		return model.BGPFilter{}, errs
	}
	return out, nil
}

// BGPFilter validates a BGPFilter.
func BGPFilter(f *v1.BGPFilter) field.ErrorList {
	_, errs := ParseBGPFilter(f)
	return errs
}

// ruleFields are a rule's fields, of either family.
type ruleFields struct {
	CIDR          string
	MatchOperator v1.BGPFilterMatchOperator
	Min, Max      *int32
	Source        v1.BGPFilterMatchSource
	Action        v1.BGPFilterAction
}

func rules4(rs []v1.BGPFilterRuleV4) []ruleFields {
	out := make([]ruleFields, len(rs))
	for i, r := range rs {
		out[i] = ruleFields{CIDR: r.CIDR, MatchOperator: r.MatchOperator, Source: r.Source, Action: r.Action}
		if r.PrefixLength != nil {
			out[i].Min, out[i].Max = r.PrefixLength.Min, r.PrefixLength.Max
		}
	}
	return out
}

func rules6(rs []v1.BGPFilterRuleV6) []ruleFields {
	out := make([]ruleFields, len(rs))
	for i, r := range rs {
		out[i] = ruleFields{CIDR: r.CIDR, MatchOperator: r.MatchOperator, Source: r.Source, Action: r.Action}
		if r.PrefixLength != nil {
			out[i].Min, out[i].Max = r.PrefixLength.Min, r.PrefixLength.Max
		}
	}
	return out
}

func parseFilterRule(path *field.Path, r ruleFields, fam ipfamily.Family, export bool) (model.FilterRule, field.ErrorList) {
	var errs field.ErrorList
	out := model.FilterRule{Family: fam}
	switch r.Action {
	case v1.BGPFilterAccept:
		out.Accept = true
	case v1.BGPFilterReject:
	default:
		errs = append(errs, field.NotSupported(path.Child("action"), r.Action, []string{string(v1.BGPFilterAccept), string(v1.BGPFilterReject)}))
	}
	switch r.Source {
	case "":
	case v1.BGPFilterSourceRemotePeers:
		if !export {
			errs = append(errs, field.Invalid(path.Child("source"), r.Source, "applies to export rules only"))
		}
		out.RemotePeers = true
	default:
		errs = append(errs, field.NotSupported(path.Child("source"), r.Source, []string{string(v1.BGPFilterSourceRemotePeers)}))
	}
	switch {
	case r.CIDR == "" && r.MatchOperator != "":
		errs = append(errs, field.Required(path.Child("cidr"), fmt.Sprintf("required with matchOperator %s", r.MatchOperator)))
	case r.CIDR != "" && r.MatchOperator == "":
		errs = append(errs, field.Required(path.Child("matchOperator"), fmt.Sprintf("required with cidr %s", r.CIDR)))
	}
	bits := uint8(fam.Bits())
	var cidrOK bool
	if r.CIDR != "" {
		p, err := ParseCIDR(r.CIDR)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("cidr"), r.CIDR, err.Error()))
		case ipfamily.OfPrefix(p) != fam:
			errs = append(errs, field.Invalid(path.Child("cidr"), r.CIDR, fmt.Sprintf("is not an %s CIDR", fam)))
		default:
			out.Prefix, out.MinLen, out.MaxLen, cidrOK = p, uint8(p.Bits()), bits, true
		}
	}
	switch r.MatchOperator {
	case "", v1.BGPFilterIn:
	case v1.BGPFilterNotIn:
		out.Negate = true
	case v1.BGPFilterEqual, v1.BGPFilterNotEqual:
		out.MaxLen = out.MinLen
		out.Negate = r.MatchOperator == v1.BGPFilterNotEqual
	default:
		errs = append(errs, field.NotSupported(path.Child("matchOperator"), r.MatchOperator,
			[]string{string(v1.BGPFilterEqual), string(v1.BGPFilterNotEqual), string(v1.BGPFilterIn), string(v1.BGPFilterNotIn)}))
	}
	if pl := r; pl.Min != nil || pl.Max != nil {
		plPath := path.Child("prefixLength")
		if r.MatchOperator != v1.BGPFilterIn && r.MatchOperator != v1.BGPFilterNotIn {
			errs = append(errs, field.Invalid(plPath, r.MatchOperator, "applies to matchOperator In or NotIn only"))
		}
		for _, b := range []struct {
			name string
			v    *int32
			set  *uint8
		}{{"min", pl.Min, &out.MinLen}, {"max", pl.Max, &out.MaxLen}} {
			if b.v == nil {
				continue
			}
			lo := int32(0)
			if cidrOK {
				lo = int32(out.Prefix.Bits())
			}
			if *b.v < lo || *b.v > int32(bits) {
				errs = append(errs, field.Invalid(plPath.Child(b.name), *b.v, fmt.Sprintf("must lie between the length of cidr %s (%d) and %d", r.CIDR, lo, bits)))
				continue
			}
			*b.set = uint8(*b.v)
		}
		if pl.Min != nil && pl.Max != nil && *pl.Min > *pl.Max {
			errs = append(errs, field.Invalid(plPath.Child("min"), *pl.Min, fmt.Sprintf("is greater than max %d", *pl.Max)))
		}
	}
	return out, errs
}

// ParseCommunity parses a community value: standard aa:nn (aa 1..65535: tabby keeps 0:nn for
// its own marks) or large aa:nn:mm. It returns the value in canonical form and whether it is
// large.
func ParseCommunity(s string) (string, bool, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 2 && len(parts) != 3 {
		return "", false, fmt.Errorf("not a community: aa:nn or aa:nn:mm")
	}
	limit := uint64(65535)
	if len(parts) == 3 {
		limit = 4294967295
	}
	vals := make([]string, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil || len(p) > 10 || n > limit {
			return "", false, fmt.Errorf("not a community: each part of aa:nn is 0..65535, of aa:nn:mm 0..4294967295")
		}
		vals[i] = strconv.FormatUint(n, 10)
	}
	if len(parts) == 2 && vals[0] == "0" {
		return "", false, fmt.Errorf("0:nn is reserved: tabby marks its own routes with 0:nn inside the speaker")
	}
	return strings.Join(vals, ":"), len(parts) == 3, nil
}

// ParsePrefixAdvertisements returns the BGPConfiguration's prefixAdvertisements with their
// community names resolved, and the errors of its communities and prefixAdvertisements.
func ParsePrefixAdvertisements(c *v1.BGPConfiguration) ([]model.PrefixCommunities, field.ErrorList) {
	if c == nil {
		return nil, nil
	}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	named := map[string]string{}
	for i, cm := range c.Spec.Communities {
		path := spec.Child("communities").Index(i)
		if cm.Name == "" {
			errs = append(errs, field.Required(path.Child("name"), "a community needs a name"))
		} else if strings.Contains(cm.Name, ":") {
			errs = append(errs, field.Invalid(path.Child("name"), cm.Name, "must not contain a colon: a value has one"))
		} else if _, dup := named[cm.Name]; dup {
			errs = append(errs, field.Duplicate(path.Child("name"), cm.Name))
		}
		v, _, err := ParseCommunity(cm.Value)
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("value"), cm.Value, err.Error()))
		}
		named[cm.Name] = v
	}
	var out []model.PrefixCommunities
	for i, a := range c.Spec.PrefixAdvertisements {
		path := spec.Child("prefixAdvertisements").Index(i)
		p, err := ParseCIDR(a.CIDR)
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("cidr"), a.CIDR, err.Error()))
		}
		pc := model.PrefixCommunities{Prefix: p, LocalPref: a.LocalPref}
		if len(a.Communities) == 0 && a.LocalPref == nil {
			errs = append(errs, field.Required(path.Child("communities"), "a prefixAdvertisement needs communities or a localPref"))
		}
		for j, ref := range a.Communities {
			name := string(ref)
			v, ok := named[name]
			large := false
			switch {
			case strings.Contains(name, ":"):
				if v, large, err = ParseCommunity(name); err != nil {
					errs = append(errs, field.Invalid(path.Child("communities").Index(j), name, err.Error()))
					continue
				}
			case !ok:
				errs = append(errs, field.Invalid(path.Child("communities").Index(j), name, "no such name in spec.communities"))
				continue
			default:
				_, large, _ = ParseCommunity(v)
			}
			if large {
				pc.Large = append(pc.Large, v)
			} else {
				pc.Standard = append(pc.Standard, v)
			}
		}
		out = append(out, pc)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// validFilterNames checks a BGPPeer's filters: names, each once, a few.
func validFilterNames(path *field.Path, names []string) field.ErrorList {
	var errs field.ErrorList
	if len(names) > maxPeerFilters {
		errs = append(errs, field.TooMany(path, len(names), maxPeerFilters))
	}
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case n == "":
			errs = append(errs, field.Required(path.Index(i), "a BGPFilter's name"))
		case seen[n]:
			errs = append(errs, field.Duplicate(path.Index(i), n))
		default:
			if e := tooLong(path.Index(i), n, maxNameLen); e != nil {
				errs = append(errs, e)
			}
		}
		seen[n] = true
	}
	return errs
}
