package syncer

import (
	"slices"
	"strings"
	"sync"
)

// maxLabelSets bounds the table of shared label sets. Pods with labels of their own (a
// StatefulSet's pod-name label, a Job's controller-uid) each add one; when the table is full it
// starts again empty: the pods already cached keep the maps they have, new pods share afresh.
const maxLabelSets = 4096

// labelSets shares equal label maps between cached pods. The pods of one Deployment, ReplicaSet
// or DaemonSet carry the same labels, and even a small Go map is not small: in a large cluster
// every tabby-node would otherwise hold the same maps many times over. A shared map must never
// be modified; nothing modifies a cached object.
type labelSets struct {
	mu   sync.Mutex
	sets map[string]map[string]string
}

func newLabelSets() *labelSets { return &labelSets{sets: map[string]map[string]string{}} }

// intern returns the shared map equal to m (m itself the first time).
func (l *labelSets) intern(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	key := labelKey(m)
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.sets[key]; ok {
		return s
	}
	if len(l.sets) >= maxLabelSets {
		clear(l.sets)
	}
	l.sets[key] = m
	return m
}

// labelKey is m's keys and values in key order; NUL appears in neither (label syntax).
func labelKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}
