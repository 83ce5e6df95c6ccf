// Package rpc is tabby-node's node-local IPAM service: the CNI plugins (tabby, tabby-ipam) ask it
// for addresses over a unix socket instead of each invocation building its own API client and
// reading pools and blocks cold. tabby-node keeps one warm connection to the API server and the
// allocator's caches; the plugins fall back to the same Service (NewLocal, through OpenLocal) run
// against the API server directly when the socket does not answer, so pods still start while
// tabby-node restarts. The contract (the Service, its messages, errors and transports) is
// package api, whose doc says how to add a method.
package rpc
