package syncer

import (
	"fmt"
	"reflect"
	"testing"
)

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestLabelSetsShareEqualMaps(t *testing.T) {
	l := newLabelSets()
	a := l.intern(map[string]string{"app": "web", "tier": "front"})
	b := l.intern(map[string]string{"tier": "front", "app": "web"})
	if !sameMap(a, b) {
		t.Fatal("equal label sets not shared")
	}
	// Keys and values run together must not collide: {"a": "b=c"} vs {"a=b": "c"}, and a
	// value that looks like the next key.
	for _, m := range []map[string]string{{"a": "b=c"}, {"a=b": "c"}, {"a": "", "b": "c"}, {"a": "b", "c": ""}, {"app": "web"}} {
		if got := l.intern(m); !sameMap(got, m) || sameMap(got, a) {
			t.Errorf("%v shared with another set", m)
		}
	}
	if l.intern(map[string]string{}) != nil || l.intern(nil) != nil {
		t.Error("an empty label set is not nil")
	}
}

func TestLabelSetsBounded(t *testing.T) {
	l := newLabelSets()
	first := l.intern(map[string]string{"pod": "0"})
	for i := 1; i < maxLabelSets+10; i++ {
		l.intern(map[string]string{"pod": fmt.Sprint(i)})
	}
	if n := len(l.sets); n > maxLabelSets {
		t.Fatalf("%d label sets kept, want at most %d", n, maxLabelSets)
	}
	// Forgotten, not broken: an equal set is a new map, with the same labels.
	again := l.intern(map[string]string{"pod": "0"})
	if sameMap(again, first) || again["pod"] != "0" {
		t.Errorf("after the table started again: %v (shared %v)", again, sameMap(again, first))
	}
}
