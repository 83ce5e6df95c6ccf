// Package syncer turns the datastore into the change stream this node's agents are fed
// (Config.OnUpdate): apis/model's typed messages (nodes, pools, LoadBalancer pools, blocks, this
// node's workloads, the dataplane's FelixConfiguration, BGP's configuration, filters, peers and
// the Secrets their passwords refer to, the Services this node may announce) and every pod's
// addresses
// (felix.PodIPsUpdate, then felix.PodIPsDelta), each object parsed once at the edge
// (apis/validation).
//
// The informers (watch.go) only collect objects and mark the keys that changed. A pass, run by
// Syncer.Run after a burst of events (paced under a stream of them: pace.go), reads only those
// objects, keeps each Node parsed and each IPAMBlock's view while its resourceVersion stays
// (cache.go), and compares them with what it sent (stream.go): a new version that changes
// nothing tabby reads sends nothing, and a pod replaced on another node costs the same whatever
// the cluster's size (BenchmarkStreamPodReplaced).
//
// The order of a pass's messages is part of the contract: nodes, pools, LoadBalancer pools,
// blocks, this node's workloads, the pods' addresses, the FelixConfiguration, BGP's
// configuration, Secrets, filters, peers, Services, each kind by name (a Service by
// namespace/name). The first pass sends every object as an update, its WorkloadUpdates before its
// PodIPsUpdate, every Service that may be announced, and ends with model.InSync; tabby-node's
// routing of the messages and felix's policy manager rely on it.
//
// An IPPool for LoadBalancer addresses is never a PoolUpdate (felix would route, blackhole and
// NAT it as a pod pool): it is a LoadBalancerPoolUpdate, and a pool whose uses change is one
// kind's removal and the other's update in the same pass. A Service is sent when something
// model.Service holds changes, whether this node has a ready endpoint of it among them; an
// EndpointSlice event that does not change that (endpoints on other nodes: most of them) marks
// nothing and costs no pass (services.go, BenchmarkStreamEndpointSlices).
//
// Build computes the same state at once from every object, with the same parsers and nothing
// kept between calls: the reference model the randomized tests compare the stream with after
// every step, and what tabbyctl reads of the blocks (PolicyInput). PolicyWatcher sends felix
// NetworkPolicy's other inputs (Pods, Namespaces, NetworkPolicies) one event at a time.
package syncer
