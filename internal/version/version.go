// Package version holds the build's version, stamped by the Makefile with
// -ldflags "-X github.com/tabbynet/tabby/internal/version.Version=<git describe>".
package version

// Version is "dev" in builds that were not stamped (go run, go test).
var Version = "dev"
