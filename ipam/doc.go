// Package ipam is tabby's block IPAM: IPPools are cut into blocks of blockSize addresses; a node
// claims a free block when its own blocks are full (the lowest free one, found by walking the
// gaps between the blocks in use, freeblocks.go), and hands out addresses from its blocks to its
// workloads.
//
// Both families go through the same code: a pool's family is its prefix's (apis/ippool), a
// Request asks for one address of one family (IPv4 unless it says otherwise), and a dual-stack
// attachment makes one request per family under one handle, which then lists a block of each.
// Everything below holds per family. All state lives in the datastore (IPAMBlock, BlockAffinity and IPAMHandle
// objects, see apis/v1/ipam_types.go) and every write is a compare-and-swap on the object's
// resourceVersion; a lost compare-and-swap re-reads and retries, a bounded number of times.
//
// # Objects
//
//   - IPAMBlock (names.BlockName(cidr)): spec.affinity "host:<node>" while a node owns it, and
//     spec.allocations, ordinal (decimal) → {handle, namespace, pod, node}. The block is the
//     truth about which address is taken. Creating it is the claim: of two nodes racing for the
//     same free block exactly one Create succeeds; the other gets AlreadyExists and moves on to
//     the next free block.
//   - BlockAffinity (names.AffinityName(node, cidr)): the node's claim, for routing (the node
//     advertises the block).
//   - IPAMHandle (names.HandleName(handleID)), handleID <network>.<containerID>: only for an
//     attachment holding a borrowed address (in another node's block), which DEL on its node
//     could not find otherwise: the blocks where it holds addresses. Its annotation tabby.dev/node
//     names the node that created it. An address in one of the node's own blocks has none: the
//     block names its handle, and the node's blocks are what DEL looks at first (NeedsHandle).
//
// # Write order, and what a crash between two writes leaves
//
// Assign, address in one of the node's own blocks (the common case): one write, the block
// update with the allocation, which names the handle. The node's blocks are this process's
// cache and are what Assign, Lookup and ReleaseHandle look at besides the handle objects; the
// plugins' direct path (a process per CNI call) loads the node's blocks first. A repeated Assign
// (the runtime's retry after a crash) finds the handle's address there and answers with it; DEL
// finds it there too; if the pod is gone and no DEL comes, the garbage collector releases it
// after its grace period.
//
// Assign, borrowed address (another node's block, which this node's cache does not hold): the
// handle is written first, then the block, so that DEL finds the address through the handle
// alone. A crash in between leaves a handle without allocation: a repeated Assign adds the block
// of its new address to it; otherwise the garbage collector deletes it after its grace period
// ("handle without allocation"). A borrowed allocation whose handle object is missing (deleted
// by hand) gets it written again by the collector ("allocation without handle").
//
// A handle may list more than one block (a dual-stack attachment borrowing in both families):
// release visits them all, so nothing leaks.
//
// Claim (inside Assign): (a) create the IPAMBlock with the node's affinity; (b) create the
// BlockAffinity. A crash after (a) leaves a block without affinity object; the node's allocator
// recreates the affinity when it loads the node's blocks (and the block is used normally).
//
// Release by handle: (0) GET the handle, which usually does not exist, unless the caller knows the
// addresses (a DEL's prevResult) and each is in one of its node's own blocks, where no handle
// exists (ReleaseHeld); (1) remove the allocations
// from each block the handle lists, and from the node's blocks that hold the handle; (2) delete
// the handle if there was one (with its resourceVersion as precondition: a handle an Assign added
// a block to in between is looked at again). A crash after (1) leaves a handle without
// allocation: DEL again, or the garbage collector, deletes it. Releasing an unknown handle
// succeeds.
//
// Release of an empty block (after AffinityGracePeriod): (1) delete the block with its
// resourceVersion as precondition, so an allocation that landed in the meantime (a borrower's)
// makes the delete fail and the block stays; (2) delete the BlockAffinity. A crash after (1)
// leaves an affinity without block; the node's allocator deletes it when it loads, and
// `ipam.Check` reports it.
//
// Nothing is ever allocated twice: an address is taken only by a successful compare-and-swap on
// its block, and released only by another. The garbage collector releases an allocation only if
// it still holds the same handle at a fresh read (Allocator.ReleaseIfHeld), after a fresh GET
// of the pod says it is gone. Allocations without pod attributes (the tunnel address) are never
// released by the collector. An allocation whose handle object is missing is released if its pod
// is gone, otherwise its handle is written again.
//
// # Performance
//
// One Allocator per process (tabby-node) serves every CNI call of its node: it caches the
// node's affine blocks (refreshed when a compare-and-swap finds them stale), pools, node labels
// and namespace annotations (CacheTTL; past it the last copy is served while one background read
// refreshes it), and takes the pod's annotations from tabby-node's informer of the node's pods
// (Config.PodAnnotations, package podcache). A pod's ADD and DEL then cost the API server two
// requests, a block update each (three for a DEL without prevResult: the handle GET, not found).
// Kubernetes counts them (apiserver_request_total), and hack/bench/scale prints them per pod.
//
// Group commit (commit.go): Assigns on one node are not serialised one block update each. While
// an update for the node is in flight the others queue; the node's committer then chooses all
// queued requests' ordinals in its in-memory copy of the block and writes them in ONE update
// (a lost compare-and-swap re-reads the block and retries the batch; each request gets its own
// result or error). The write order above holds per request. Releases of one block are
// serialised per block.
package ipam
