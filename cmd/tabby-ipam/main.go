// Command tabby-ipam is tabby's IPAM as a CNI IPAM plugin, and the tabby plugin's direct path to
// the API server (see cni-plugin/README.md).
package main

import (
	"github.com/tabbynet/tabby/cni-plugin/ipamplugin"
	"github.com/tabbynet/tabby/internal/version"
	"github.com/tabbynet/tabby/ipam/rpc"
)

func main() { ipamplugin.Main(rpc.OpenLocal, "tabby-ipam CNI IPAM plugin "+version.Version) }
