package ipam

// QueuedAssigns is how many Assigns wait for node's committer (tests of the group commit).
func QueuedAssigns(a *Allocator, node string) int {
	ns := a.knownNode(node)
	if ns == nil {
		return 0
	}
	ns.qmu.Lock()
	defer ns.qmu.Unlock()
	return len(ns.queue)
}
