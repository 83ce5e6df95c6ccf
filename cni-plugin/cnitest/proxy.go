package cnitest

import (
	"fmt"
	"net"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/internal/netnsfwd"
)

// Proxy forwards TCP connections made inside the node namespace to an address reachable from the
// test process (the control plane on the machine's loopback): the plugins' direct path reaches
// the API server without any link or address added to the machine's own namespace.
type Proxy struct {
	Addr string // host:port, inside the node namespace
	fwd  *netnsfwd.Forwarder
}

// Proxy starts a forwarder to target (host:port) listening on 127.0.0.1 inside the node.
func (n *HostNS) Proxy(target string) (*Proxy, error) {
	var l net.Listener
	if err := n.Do(func() error {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		return nil, fmt.Errorf("listen in node netns: %w", err)
	}
	f := netnsfwd.Serve(l, target)
	return &Proxy{Addr: f.Addr(), fwd: f}, nil
}

// Close stops accepting and cuts the relayed connections.
func (p *Proxy) Close() { p.fwd.Close() }

// RewriteKubeconfig writes a copy of the kubeconfig at src to dst whose clusters point at
// server (e.g. "https://" + proxy.Addr).
func RewriteKubeconfig(src, dst, server string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	return clientcmd.WriteToFile(*cfg, dst)
}

// HostPort is the host:port of a URL.
func HostPort(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}
