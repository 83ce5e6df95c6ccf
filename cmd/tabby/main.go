// Command tabby is the tabby CNI plugin (see cni-plugin/README.md).
package main

import (
	"github.com/tabbynet/tabby/cni-plugin/ipamclient"
	"github.com/tabbynet/tabby/cni-plugin/plugin"
	"github.com/tabbynet/tabby/internal/version"
)

// The direct IPAM path runs in tabby-ipam: this binary stays free of the Kubernetes client.
func main() {
	plugin.Main(ipamclient.ExecOpener("tabby-ipam"), "tabby CNI plugin "+version.Version)
}
