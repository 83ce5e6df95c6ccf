package server

import (
	"math/bits"
	"sync"

	"github.com/osrg/gobgp/v4/internal/pkg/table"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// tabby's change (TABBY.md): what a peer was sent is a bitset over numbered destinations.
//
// GoBGP records, per peer and destination, the add-path identifiers it sent. A route
// reflector with 1,000 clients holds a million such records, and as a map per peer keyed by
// (family, prefix) they took 76 MB of a 100 MB heap (and their growth 5 % of its CPU at the
// start). Destinations are numbered once for the whole process (destNumbers), each with a
// count of the peers that hold it, so that a number is reused once no peer holds it: a peer
// records the destinations it was sent with identifier 0 alone (every destination, without
// add-path) as bits, a bit per destination, and keeps a set only for the others. BIRD keeps
// the same record as a bitmap per channel.

// destNumbers numbers the destinations that any peer of any server in the process was sent.
var destNumbers destIndex

type destIndex struct {
	mu   sync.RWMutex
	ids  map[table.PathDestLocalKey]uint32
	keys []table.PathDestLocalKey // by number
	refs []uint32                 // peers holding each number; 0: free
	free []uint32
}

// lookup returns the destination's number if some peer holds it.
func (x *destIndex) lookup(k table.PathDestLocalKey) (uint32, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	id, ok := x.ids[k]
	return id, ok
}

// acquire returns the destination's number, numbering it if no peer holds it, and counts one
// more peer holding it.
func (x *destIndex) acquire(k table.PathDestLocalKey) uint32 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if id, ok := x.ids[k]; ok {
		x.refs[id]++
		return id
	}
	if x.ids == nil {
		x.ids = map[table.PathDestLocalKey]uint32{}
	}
	var id uint32
	if n := len(x.free); n > 0 {
		id, x.free = x.free[n-1], x.free[:n-1]
		x.keys[id], x.refs[id] = k, 1
	} else {
		id = uint32(len(x.keys))
		x.keys, x.refs = append(x.keys, k), append(x.refs, 1)
	}
	x.ids[k] = id
	return id
}

// release counts one peer less holding each number, and frees a number no peer holds.
func (x *destIndex) release(ids ...uint32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range ids {
		if x.refs[id]--; x.refs[id] == 0 {
			delete(x.ids, x.keys[id])
			x.keys[id] = table.PathDestLocalKey{}
			x.free = append(x.free, id)
		}
	}
}

// sentPathsMap maps a destination to the pathIDSet sent for it. Its zero value is empty and
// numbers destinations in destNumbers. A set once stored is never modified: a change stores
// another, so that the paths counted per family stay the sum of the sets' sizes.
type sentPathsMap struct {
	mu   sync.RWMutex
	zero []uint64             // destinations sent with identifier 0 alone, by number
	sets map[uint32]pathIDSet // the other destinations, by number
	n    int
	// paths counts the paths sent per family, what ListPeer reports as advertised. tabby's
	// change (TABBY.md): upstream counted them by running every destination of the RIB
	// through the peer's export policy, under the server's lock, for every peer: 2 s per call
	// at a route reflector with 1,000 clients, with every session's messages held up.
	paths map[bgp.Family]int
	// closed: the peer is gone; what it would still be sent is not recorded, so that no
	// number stays held by a peer nobody sees.
	closed bool
}

func (s *sentPathsMap) has(id uint32) (pathIDSet, bool) {
	if w := int(id / 64); w < len(s.zero) && s.zero[w]&(1<<(id%64)) != 0 {
		return sentWithIDZero, true
	}
	v, ok := s.sets[id]
	return v, ok
}

func (s *sentPathsMap) setZero(id uint32, on bool) {
	w := int(id / 64)
	if on {
		for w >= len(s.zero) {
			s.zero = append(s.zero, 0)
		}
		s.zero[w] |= 1 << (id % 64)
	} else if w < len(s.zero) {
		s.zero[w] &^= 1 << (id % 64)
	}
}

// Load returns the set sent for the destination: sentWithIDZero, shared and never to be
// modified, when that is identifier 0 alone.
func (s *sentPathsMap) Load(k table.PathDestLocalKey) (pathIDSet, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	// Looked up under the peer's lock: a number the peer holds cannot be freed and given to
	// another destination meanwhile.
	id, ok := destNumbers.lookup(k)
	if !ok {
		return nil, false
	}
	return s.has(id)
}

func (s *sentPathsMap) Store(k table.PathDestLocalKey, v pathIDSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := destNumbers.lookup(k)
	var old pathIDSet
	if ok {
		old, ok = s.has(id)
	}
	if !ok {
		if s.closed {
			return
		}
		id = destNumbers.acquire(k)
		s.n++
	}
	if s.paths == nil {
		s.paths = map[bgp.Family]int{}
	}
	s.paths[k.Family] += len(v) - len(old)
	_, onlyZero := v[0]
	onlyZero = onlyZero && len(v) == 1
	s.setZero(id, onlyZero)
	if onlyZero {
		delete(s.sets, id)
		return
	}
	if s.sets == nil {
		s.sets = map[uint32]pathIDSet{}
	}
	s.sets[id] = v
}

func (s *sentPathsMap) Delete(k table.PathDestLocalKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := destNumbers.lookup(k)
	if !ok {
		return
	}
	old, ok := s.has(id)
	if !ok {
		return
	}
	s.paths[k.Family] -= len(old)
	s.setZero(id, false)
	delete(s.sets, id)
	s.n--
	destNumbers.release(id)
}

// Clear forgets every destination, and the record's memory with it.
func (s *sentPathsMap) Clear() { s.clear(false) }

// close clears the record of a peer that is gone, for good.
func (s *sentPathsMap) close() { s.clear(true) }

func (s *sentPathsMap) clear(closing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = s.closed || closing
	ids := make([]uint32, 0, s.n)
	for w, word := range s.zero {
		for ; word != 0; word &= word - 1 {
			ids = append(ids, uint32(w*64+bits.TrailingZeros64(word)))
		}
	}
	for id := range s.sets {
		ids = append(ids, id)
	}
	destNumbers.release(ids...)
	s.zero, s.sets, s.n, s.paths = nil, nil, 0, nil
}

func (s *sentPathsMap) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.n
}

// pathsSent is the number of paths of the family recorded as sent.
func (s *sentPathsMap) pathsSent(f bgp.Family) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.paths[f]
}
