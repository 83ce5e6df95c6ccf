// Package crdschema checks that apis/validation and the API server decide alike: its tests
// evaluate the generated CRDs' schema (OpenAPI, list types, CEL rules) in-process, as the API
// server does, on the shared case table and on generated IPPools and BGPPeers. It lives in the
// lab's module so that the product's go.mod does not name the API server's CEL libraries.
package crdschema
