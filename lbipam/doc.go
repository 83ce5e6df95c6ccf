// Package lbipam decides the addresses of Services of type LoadBalancer: given the LoadBalancer
// pools, the addresses Services already hold and one Service's request, which addresses it gets,
// or why it gets none. It does no I/O: the controller (lbipam/controller) feeds it what it reads
// from the API server and writes what it decides, so every rule here is table-tested.
//
// The rules are Calico's LoadBalancer IPAM and MetalLB's: a requested address must lie in a
// LoadBalancer pool; a Service naming pools (tabby.dev/ipv4pools, tabby.dev/ipv6pools) gets its
// addresses only from them; a Manual pool serves only the Services that name it or one of its
// addresses; a disabled pool hands out nothing new; a Service that requires dual stack gets one
// address of each family or none; two Services share an address only when they carry the same
// sharing key, their ports do not clash and they send traffic to the same endpoints under
// externalTrafficPolicy Local (or both use Cluster).
package lbipam
