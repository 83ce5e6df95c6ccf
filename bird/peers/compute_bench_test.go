package peers

import (
	"fmt"
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

// A computation in a 1,000-node cluster without the mesh, as the scale bench's agents run it:
// 300 BGPPeers to racks' routers this node is in none of, and one that meshes the agents. Every
// Node change elsewhere in the cluster costs an agent one of these.
func BenchmarkCompute1000Nodes(b *testing.B) {
	in := Input{LocalNode: "agent-a", Config: &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{NodeToNodeMeshEnabled: ptr(false)}}}
	in.Nodes = append(in.Nodes, node("agent-a", "198.51.100.250/24", map[string]string{"bench": "agent"}, 0, ""))
	for i := range 1000 {
		in.Nodes = append(in.Nodes, node(fmt.Sprintf("sim-%04d", i), fmt.Sprintf("203.0.%d.%d/16", 113+i/250, i%250+1), map[string]string{"rack": fmt.Sprintf("r%02d", i/20)}, 0, ""))
	}
	for r := range 300 {
		in.Peers = append(in.Peers, peer(fmt.Sprintf("tor-%03d", r), v1.BGPPeerSpec{NodeSelector: fmt.Sprintf("rack == 'r%02d'", r%50), PeerIP: fmt.Sprintf("198.51.100.%d", r%200+1), ASNumber: 65000 + uint32(r)}))
	}
	in.Peers = append(in.Peers, peer("agents", v1.BGPPeerSpec{NodeSelector: "bench == 'agent'", PeerSelector: "bench == 'agent'"}))
	for b.Loop() {
		if _, err := Compute(in); err != nil {
			b.Fatal(err)
		}
	}
}
