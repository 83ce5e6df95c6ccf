// Package crds embeds the generated CustomResourceDefinitions (make generate writes them).
package crds

import "embed"

// FS holds every CRD manifest of tabby.
//
//go:embed *.yaml
var FS embed.FS
