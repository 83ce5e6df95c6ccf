package dirtyset

import (
	"slices"
	"testing"
)

func TestSet(t *testing.T) {
	var s Set[int]
	for _, k := range []int{3, 1, 3, 2, 1} {
		s.Add(k)
	}
	if !slices.Equal(s.Keys(), []int{3, 1, 2}) || s.Len() != 3 {
		t.Fatalf("keys %v", s.Keys())
	}
	s.Clear()
	if s.Len() != 0 {
		t.Fatalf("after Clear: %v", s.Keys())
	}
	s.Add(1)
	if !slices.Equal(s.Keys(), []int{1}) {
		t.Fatalf("after Clear and Add: %v", s.Keys())
	}
}

// Emptying a set that once held many keys costs what it holds now.
func BenchmarkClearAfterGrowth(b *testing.B) {
	var s Set[int]
	for i := 0; i < 100000; i++ {
		s.Add(i)
	}
	s.Clear()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Add(i)
		s.Add(i + 1)
		s.Clear()
	}
}
