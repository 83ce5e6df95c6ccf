package policy

// Affects tells whether pod takes part in what the calculator renders, judged by its metadata:
// it is one of the node's endpoints (policies select it, its named ports resolve), a peer that
// some rule's pod selection picks, or a pod whose named port an egress rule names (such rules
// match every pod's named port). Nothing else about any other pod — its addresses, its labels
// while they stay unselected, whether it exists — changes the rendering: felix need not compute
// again for it, and in a large cluster most pod events are of such pods. Namespaces and
// policies are not judged here: a change to either always computes again.
func (c *Calculator) Affects(pod *Pod) bool {
	if pod == nil {
		return false
	}
	if c.endpointPods[pod.Key] {
		return true
	}
	if pod.HostNetwork {
		return false // never a peer, never in a named-port set
	}
	for _, p := range c.policies {
		for d, rules := range p.rules {
			for _, r := range rules {
				for _, pe := range r.peers {
					if pe.kind == peerPods && c.selectsPod(&pe.pods, pod) {
						return true
					}
				}
				if direction(d) != egress || len(pod.NamedPorts) == 0 {
					continue
				}
				for _, ps := range r.ports {
					if ps.kind == portNamed && len(resolveNamedPort(pod, ps.name, ps.proto)) > 0 {
						return true
					}
				}
			}
		}
	}
	return false
}
