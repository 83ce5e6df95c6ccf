// Package v1 holds tabby's CRD types, group tabby.dev, version v1. Every kind is cluster-scoped.
//
// The OpenAPI and CEL rules in the kubebuilder markers make the API server refuse bad objects with
// the field named; package apis/validation applies the same rules in Go for the CLI and the agents,
// and a test table shared by both keeps them in step.
//
// +kubebuilder:object:generate=true
// +groupName=tabby.dev
package v1
