package selector

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// FuzzParse checks, for any expression Parse accepts: String is canonical (Parse reads it back
// as a selector that prints the same and matches the same labels), and a selector that is a
// conjunction of label tests matches exactly as Kubernetes' labels.Selector built from the same
// tests. labelText adds label sets to try, "k=v" separated by ';' and sets by '|'.
func FuzzParse(f *testing.F) {
	for _, expr := range []string{
		"", "all()", "has(tabby.dev/route-reflector)", "!has(tabby.dev/route-reflector)",
		"zone == 'a'", `zone == "b"`, `zone == "it's"`, `zone == 'say "hi"'`, "zone != 'a'",
		"zone in {'a', 'c'}", "zone in {}", `zone in {"it's", 'b'}`, "zone not in {'a'}",
		"has(zone) && zone == 'b'", "zone == 'a' || zone == 'b'", "!(zone == 'a' || zone == 'b')",
		"has(zone) && (zone == 'a' || has(tabby.dev/route-reflector))", "!!has(x)", "in in {'in'}",
		"not in {'a'}", "rack == 'r1' && zone in {'a','b'} && !has(tabby.dev/no-pods)",
		// Refused: the parser must say so, never panic.
		"has(", "zone ==", "zone = 'a'", "zone == a", "zone in {'a'", "(has(x)", "has(x) &&",
		"all() junk", "zone == 'a", "!", "!=", "((((", "zone in {'a',}", "k == 'v' || || k == 'w'",
	} {
		f.Add(expr, "zone=a|zone=b;tabby.dev/route-reflector=true|x=|in=in")
	}
	f.Fuzz(func(t *testing.T, expr, labelText string) {
		s, err := Parse(expr)
		if err != nil {
			if !strings.Contains(err.Error(), "at offset") {
				t.Fatalf("Parse(%q): error %q does not say where", expr, err)
			}
			return
		}
		canon := s.String()
		again, err := Parse(canon)
		if err != nil {
			t.Fatalf("Parse(%q) = %s, which does not parse: %v", expr, canon, err)
		}
		if got := again.String(); got != canon {
			t.Fatalf("Parse(%q) prints %s, which prints %s", expr, canon, got)
		}
		sets := labelSets(s, labelText)
		for _, l := range sets {
			if s.Matches(l) != again.Matches(l) {
				t.Fatalf("%q and its canonical form %s disagree on %v", expr, canon, l)
			}
		}
		k8s, ok := kubernetesSelector(s)
		if !ok {
			return
		}
		for _, l := range sets {
			if got, want := s.Matches(l), k8s.Matches(labels.Set(l)); got != want {
				t.Fatalf("%q matches %v: %v; Kubernetes' %s: %v", expr, l, got, k8s, want)
			}
		}
	})
}

// labelSets are the label sets to try: those of labelText, and for each key the selector
// names, the label absent, set to each value the selector names, and set to another value.
func labelSets(s Selector, labelText string) []map[string]string {
	var out []map[string]string
	for _, set := range strings.Split(labelText, "|") {
		l := map[string]string{}
		for _, kv := range strings.Split(set, ";") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				l[k] = v
			}
		}
		out = append(out, l)
	}
	keys, values := map[string]bool{}, map[string]bool{"other": true}
	walk(s, func(n Selector) {
		switch n := n.(type) {
		case hasSel:
			keys[n.key] = true
		case eqSel:
			keys[n.key], values[n.value] = true, true
		case inSel:
			keys[n.key] = true
			for v := range n.set {
				values[v] = true
			}
		}
	})
	// Every combination of a few keys and values; a sample of them beyond.
	ks, vs := sortedKeys(keys), append([]string{""}, sortedKeys(values)...)
	combos := 1
	for range ks {
		if combos *= len(vs) + 1; combos > 256 {
			combos = 256
			break
		}
	}
	for c := range combos {
		l, n := map[string]string{}, c
		for _, k := range ks {
			i := n % (len(vs) + 1)
			n /= len(vs) + 1
			if i < len(vs) {
				l[k] = vs[i]
			}
		}
		out = append(out, l)
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func walk(s Selector, visit func(Selector)) {
	visit(s)
	switch n := s.(type) {
	case notSel:
		walk(n.inner, visit)
	case andSel:
		walk(n.a, visit)
		walk(n.b, visit)
	case orSel:
		walk(n.a, visit)
		walk(n.b, visit)
	}
}

// kubernetesSelector is s as a Kubernetes label selector, when s is a conjunction of tests
// Kubernetes has (the syntaxes overlap there) on keys and values Kubernetes allows.
func kubernetesSelector(s Selector) (labels.Selector, bool) {
	var reqs []labels.Requirement
	var add func(Selector) bool
	add = func(s Selector) bool {
		var key string
		var op selection.Operator
		var vals []string
		switch n := s.(type) {
		case allSel:
			return true
		case andSel:
			return add(n.a) && add(n.b)
		case hasSel:
			key, op = n.key, selection.Exists
		case eqSel:
			key, op, vals = n.key, selection.Equals, []string{n.value}
		case inSel:
			key, op, vals = n.key, selection.In, sortedKeys(n.set)
		case notSel:
			switch in := n.inner.(type) {
			case hasSel:
				key, op = in.key, selection.DoesNotExist
			case eqSel:
				key, op, vals = in.key, selection.NotEquals, []string{in.value}
			case inSel:
				key, op, vals = in.key, selection.NotIn, sortedKeys(in.set)
			default:
				return false
			}
		default:
			return false
		}
		r, err := labels.NewRequirement(key, op, vals)
		if err != nil {
			return false
		}
		reqs = append(reqs, *r)
		return true
	}
	if !add(s) {
		return nil, false
	}
	return labels.NewSelector().Add(reqs...), true
}
