package validation

import (
	"strings"
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

func TestNodeAnnotationsNameTheAnnotation(t *testing.T) {
	for _, c := range []struct {
		key, value string
		ok         bool
	}{
		{v1.AnnotationBGPIPv4Address, "198.51.100.11/24", true},
		{v1.AnnotationBGPIPv4Address, "2001:db8:100::11/64", false},
		{v1.AnnotationBGPIPv6Address, "2001:db8:100::11/64", true},
		{v1.AnnotationBGPIPv6Address, "198.51.100.11/24", false},
		{v1.AnnotationBGPIPv6Address, "::ffff:198.51.100.11/120", false},
		{v1.AnnotationBGPIPv6Address, "fe80::1/64", false},
		{v1.AnnotationBGPIPv6Address, "2001:db8:100::11", false},
	} {
		errs := NodeAnnotations(map[string]string{c.key: c.value})
		if c.ok != (len(errs) == 0) {
			t.Errorf("%s=%s: errors %v, want ok=%v", c.key, c.value, errs, c.ok)
			continue
		}
		if !c.ok && (!strings.Contains(errs[0].Error(), c.key) || !strings.Contains(errs[0].Error(), c.value)) {
			t.Errorf("%s=%s: error %q does not name the annotation and the value", c.key, c.value, errs[0])
		}
	}
}
