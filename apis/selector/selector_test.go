package selector

import "testing"

func TestMatches(t *testing.T) {
	rr := map[string]string{"tabby.dev/route-reflector": "true", "zone": "a"}
	plain := map[string]string{"zone": "b"}
	for _, tc := range []struct {
		expr      string
		rr, plain bool
	}{
		{"", true, true},
		{"all()", true, true},
		{"has(tabby.dev/route-reflector)", true, false},
		{"!has(tabby.dev/route-reflector)", false, true},
		{"zone == 'a'", true, false},
		{`zone == "b"`, false, true},
		{"zone != 'a'", false, true},
		{"missing != 'a'", true, true},
		{"zone in {'a', 'c'}", true, false},
		{"zone not in {'a'}", false, true},
		{"has(zone) && zone == 'b'", false, true},
		{"zone == 'a' || zone == 'b'", true, true},
		{"!(zone == 'a' || zone == 'b')", false, false},
		{"has(zone) && (zone == 'a' || has(tabby.dev/route-reflector))", true, false},
	} {
		s, err := Parse(tc.expr)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.expr, err)
		}
		if got := s.Matches(rr); got != tc.rr {
			t.Errorf("%q matches rr labels = %v, want %v", tc.expr, got, tc.rr)
		}
		if got := s.Matches(plain); got != tc.plain {
			t.Errorf("%q matches plain labels = %v, want %v", tc.expr, got, tc.plain)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, expr := range []string{"has(", "zone ==", "zone = 'a'", "zone == a", "zone in {'a'", "(has(x)", "has(x) &&", "all() junk", "zone == 'a"} {
		if _, err := Parse(expr); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", expr)
		}
	}
}
