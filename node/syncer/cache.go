package syncer

import (
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// viewCache keeps each Node parsed and each IPAMBlock's view while its resourceVersion stays,
// so that a pass after one block changed parses one block, not a thousand; and what the last
// updates changed, until a pass takes it. Only the syncer's Run loop uses it.
type viewCache struct {
	nodes  map[string]*cachedNode
	blocks map[string]*cachedBlock
	// nodeChanges, blockChanges: what the updates since the last take changed, an object at most
	// once per update.
	nodeChanges  []nodeChange
	blockChanges []blockChange
}

type cachedNode struct {
	rv   string
	node model.Node
}

// cachedBlock is a block's view; ok is false for a block that cannot be read (a bad cidr).
type cachedBlock struct {
	rv   string
	view blockView
	ok   bool
}

// nodeChange is a node that came (old nil), went (cur nil) or has a new version (which may
// change nothing tabby reads).
type nodeChange struct{ old, cur *model.Node }

// blockChange is a block that came, went or has a new version: old or cur is nil when the block
// was not there, or could not be read.
type blockChange struct {
	name     string
	old, cur *blockView
}

func newViewCache() *viewCache {
	return &viewCache{nodes: map[string]*cachedNode{}, blocks: map[string]*cachedBlock{}}
}

// updateNodes brings the cache up to date with the nodes that changed, by name, as get finds
// them now (nil: deleted), in name order.
func (c *viewCache) updateNodes(changed map[string]struct{}, get func(name string) *corev1.Node, log *slog.Logger) {
	for _, name := range sortedKeys(changed) {
		prev := c.nodes[name]
		n := get(name)
		switch {
		case n == nil && prev != nil:
			delete(c.nodes, name)
			c.nodeChanges = append(c.nodeChanges, nodeChange{old: &prev.node})
		case n == nil:
		case prev != nil && prev.rv == n.ResourceVersion && n.ResourceVersion != "":
		default:
			e := &cachedNode{rv: n.ResourceVersion, node: parseNode(n, log)}
			c.nodes[name] = e
			ch := nodeChange{cur: &e.node}
			if prev != nil {
				ch.old = &prev.node
			}
			c.nodeChanges = append(c.nodeChanges, ch)
		}
	}
}

// updateBlocks brings the cache up to date with the blocks that changed, by name, as get finds
// them now (nil: deleted), in name order.
func (c *viewCache) updateBlocks(changed map[string]struct{}, get func(name string) *v1.IPAMBlock, nodeName string, log *slog.Logger) {
	for _, name := range sortedKeys(changed) {
		prev := c.blocks[name]
		var old *blockView
		if prev != nil && prev.ok {
			old = &prev.view
		}
		b := get(name)
		switch {
		case b == nil && prev != nil:
			delete(c.blocks, name)
			if old != nil {
				c.blockChanges = append(c.blockChanges, blockChange{name: name, old: old})
			}
		case b == nil:
		case prev != nil && prev.rv == b.ResourceVersion && b.ResourceVersion != "":
		default:
			v, ok := viewBlock(b, nodeName, log)
			e := &cachedBlock{rv: b.ResourceVersion, view: v, ok: ok}
			c.blocks[name] = e
			ch := blockChange{name: name, old: old}
			if ok {
				ch.cur = &e.view
			}
			if ch.old != nil || ch.cur != nil {
				c.blockChanges = append(c.blockChanges, ch)
			}
		}
	}
}

// takeChanges returns the changes recorded since the last take, and forgets them.
func (c *viewCache) takeChanges() ([]nodeChange, []blockChange) {
	nodes, blocks := c.nodeChanges, c.blockChanges
	c.nodeChanges, c.blockChanges = nil, nil
	return nodes, blocks
}

// views are the valid blocks' views the cache holds, in no order.
func (c *viewCache) views(yield func(blockView) bool) {
	for _, e := range c.blocks {
		if e.ok && !yield(e.view) {
			return
		}
	}
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
