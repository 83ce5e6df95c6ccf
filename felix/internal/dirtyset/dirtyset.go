// Package dirtyset is the set of keys a manager or the route table must look at again at its
// next pass. A Go map never shrinks, and emptying or walking one costs the largest size it ever
// had: a set that held every route at the first pass would make each later pass, one new pod's,
// cost that much again. Set keeps its keys in a slice too, so a pass costs what it holds now.
package dirtyset

// Set is a set of keys in the order they were first added. The zero value is ready to use.
type Set[K comparable] struct {
	in   map[K]struct{}
	keys []K
}

// Add adds k.
func (s *Set[K]) Add(k K) {
	if _, ok := s.in[k]; ok {
		return
	}
	if s.in == nil {
		s.in = map[K]struct{}{}
	}
	s.in[k] = struct{}{}
	s.keys = append(s.keys, k)
}

// Len is the number of keys.
func (s *Set[K]) Len() int { return len(s.keys) }

// Keys returns the keys, valid until the next Add or Clear.
func (s *Set[K]) Keys() []K { return s.keys }

// Clear empties the set, in the time of its keys.
func (s *Set[K]) Clear() {
	for _, k := range s.keys {
		delete(s.in, k)
	}
	clear(s.keys)
	s.keys = s.keys[:0]
}
