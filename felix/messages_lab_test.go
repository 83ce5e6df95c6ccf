package felix_test

import (
	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/model/modeltest"
	"github.com/tabbynet/tabby/felix"
)

// The messages the namespace tests send felix for its node, node-a, as the node's syncer and
// BGP speaker will.

const nodeName = "node-a"

// thisNode is node-a's NodeUpdate: its BGP addresses ("" for none) and tunnel address.
func thisNode(bgp4, bgp6, tunnel string) model.NodeUpdate {
	return modeltest.Node(nodeName, bgp4, bgp6, tunnel)
}

// localBlock is a block affine to node-a.
func localBlock(cidr string) model.BlockUpdate { return modeltest.Block(cidr, nodeName) }

var (
	pool      = modeltest.Pool
	workload  = modeltest.Workload
	learned   = modeltest.Learned
	withdrawn = modeltest.Withdrawn
)

func send(f *felix.Felix, msgs ...any) {
	for _, m := range msgs {
		f.OnUpdate(m)
	}
}
