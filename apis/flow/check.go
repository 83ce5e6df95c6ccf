package flow

import (
	"fmt"
	"net/netip"
	"strings"
)

// CheckEndpoint refuses a Filter.From or Filter.To value that can match nothing: it must be
// NS/POD, NS/ or an address. field is the caller's name for it (--from, from).
func CheckEndpoint(field, s string) error {
	if s == "" {
		return nil
	}
	if ns, pod, ok := strings.Cut(s, "/"); ok {
		if ns == "" || strings.Contains(pod, "/") {
			return fmt.Errorf("%s: Invalid value: %q: want NAMESPACE/POD, NAMESPACE/ or an IP address", field, s)
		}
		return nil
	}
	if _, err := netip.ParseAddr(s); err != nil {
		return fmt.Errorf("%s: Invalid value: %q: want NAMESPACE/POD, NAMESPACE/ or an IP address", field, s)
	}
	return nil
}

// CheckVerdict refuses a Filter.Verdict other than allow, deny or empty.
func CheckVerdict(field string, v Verdict) error {
	switch v {
	case "", Allow, Deny:
		return nil
	}
	return fmt.Errorf("%s: Unsupported value: %q: supported values: %s, %s", field, v, Allow, Deny)
}

// Check refuses a filter with a value that can match nothing, naming the field.
func (f Filter) Check() error {
	if err := CheckEndpoint("from", f.From); err != nil {
		return err
	}
	if err := CheckEndpoint("to", f.To); err != nil {
		return err
	}
	return CheckVerdict("verdict", f.Verdict)
}
