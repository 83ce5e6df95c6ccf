package flow

import (
	"fmt"
	"net/netip"
	"strings"
)

// CheckEndpoint refuses a Filter.From or Filter.To value that can match nothing: it must be
// NS/POD, NS/ or an address. Callers name their field (--from, from=) around the error.
func CheckEndpoint(s string) error {
	if s == "" {
		return nil
	}
	if ns, pod, ok := strings.Cut(s, "/"); ok {
		if ns == "" || strings.Contains(pod, "/") {
			return fmt.Errorf("Invalid value: %q: want NAMESPACE/POD, NAMESPACE/ or an IP address", s)
		}
		return nil
	}
	if _, err := netip.ParseAddr(s); err != nil {
		return fmt.Errorf("Invalid value: %q: want NAMESPACE/POD, NAMESPACE/ or an IP address", s)
	}
	return nil
}

// CheckVerdict refuses a Filter.Verdict other than allow, deny or empty.
func CheckVerdict(v Verdict) error {
	switch v {
	case "", Allow, Deny:
		return nil
	}
	return fmt.Errorf("Unsupported value: %q: supported values: %s, %s", v, Allow, Deny)
}

// Check refuses a filter with a value that can match nothing, naming the field.
func (f Filter) Check() error {
	if err := CheckEndpoint(f.From); err != nil {
		return fmt.Errorf("from: %w", err)
	}
	if err := CheckEndpoint(f.To); err != nil {
		return fmt.Errorf("to: %w", err)
	}
	if err := CheckVerdict(f.Verdict); err != nil {
		return fmt.Errorf("verdict: %w", err)
	}
	return nil
}
