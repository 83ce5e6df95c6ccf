// Package model is tabby's one parsed view of the cluster: the Node, Pool, Block and Workload
// that every component works with, parsed and validated once where the API object enters tabby
// (apis/validation, as MetalLB's config.For does), with per-family values kept in an
// ipfamily.Pair rather than in X/X6 field pairs; and the typed changes of that view
// (updates.go): what the node's syncer sends felix's and bird's managers, one object per
// message, and the learned routes bird sends felix.
//
// Nothing here imports netlink, GoBGP or client-go: the model is plain values that a table test
// can build by hand.
package model
