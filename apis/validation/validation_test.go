package validation

import (
	"strings"
	"testing"
)

func TestCases(t *testing.T) {
	for _, tc := range Cases {
		err := Object(tc.Obj)
		switch {
		case tc.Field == "" && err != nil:
			t.Errorf("%s: want valid, got %v", tc.Name, err)
		case tc.Field != "" && err == nil:
			t.Errorf("%s: want an error naming %q, got none", tc.Name, tc.Field)
		case tc.Field != "" && !strings.Contains(err.Error(), tc.Field):
			t.Errorf("%s: error %q does not name %q", tc.Name, err, tc.Field)
		}
	}
}

func TestParsePeerIP(t *testing.T) {
	a, port, err := ParsePeerIP("198.51.100.7:1179")
	if err != nil || a.String() != "198.51.100.7" || port != 1179 {
		t.Fatalf("ParsePeerIP = %v %d %v", a, port, err)
	}
	if _, port, _ := ParsePeerIP("198.51.100.7"); port != 179 {
		t.Fatalf("default port = %d, want 179", port)
	}
}
