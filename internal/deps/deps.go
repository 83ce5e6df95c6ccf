// Package deps pins the module's direct dependencies while the tree is being built out.
package deps

import (
	_ "github.com/containernetworking/cni/libcni"
	_ "github.com/containernetworking/cni/pkg/skel"
	_ "github.com/containernetworking/plugins/pkg/ip"
	_ "github.com/containernetworking/plugins/pkg/ns"
	_ "github.com/coreos/go-iptables/iptables"
	_ "github.com/osrg/gobgp/v4/pkg/server"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/vishvananda/netlink"
	_ "google.golang.org/grpc"
	_ "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/yaml"
)
