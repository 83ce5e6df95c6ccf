// Package ipam is tabby's block IPAM: IPPools are cut into blocks of blockSize addresses, a node
// claims a free block when its own are full and hands out addresses from its blocks to its
// workloads, so that routing and BGP deal in blocks, not pod addresses. Both families go through
// the same code; a dual-stack attachment makes one request per family under one handle.
//
// All state lives in the datastore (IPAMBlock, BlockAffinity and IPAMHandle objects, see
// apis/v1/ipam_types.go) and every write is a compare-and-swap on the object's
// resourceVersion, so any number of processes may allocate at once without a lock:
//
//   - the IPAMBlock is the truth about which address is taken, and creating it is the claim;
//   - the writes are ordered so that a crash between two of them leaves something the next
//     Assign or the garbage collector (ipam/gc) recognises and repairs, never an address
//     allocated twice or a pod's address released;
//   - an IPAMHandle is written only where DEL could not find an address without it (one
//     borrowed from another node's block).
//
// One Allocator per tabby-node serves every CNI call of its node from cached blocks and pools,
// and writes concurrent Assigns on one block as one update (commit.go). The objects, the write
// order and what a crash between two writes leaves are in docs/architecture.md, "IPAM".
package ipam
