package lab

import (
	"net"

	"github.com/tabbynet/tabby/internal/netnsfwd"
)

// APIPort is where the API server answers inside every node namespace.
const APIPort = "6443"

// startForwarder makes target (the API server, a tabby-typha) reachable at 127.0.0.1:port inside
// a node namespace. A node whose link is "cut" keeps its connection: the control plane is not on
// the lab network.
func startForwarder(netns, port, target string) (*netnsfwd.Forwarder, error) {
	var ln net.Listener
	if err := inNetns(netns, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		return err
	}); err != nil {
		return nil, err
	}
	return netnsfwd.Serve(ln, target), nil
}
