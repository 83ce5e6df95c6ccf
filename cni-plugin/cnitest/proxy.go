package cnitest

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// Proxy forwards TCP connections made inside the node namespace to an address reachable from the
// test process (the control plane on the machine's loopback): the plugins' direct path reaches
// the API server without any link or address added to the machine's own namespace.
type Proxy struct {
	Addr string // host:port, inside the node namespace
	l    net.Listener
	wg   sync.WaitGroup
}

// Proxy starts a forwarder to target (host:port) listening on 127.0.0.1 inside the node.
func (n *Node) Proxy(target string) (*Proxy, error) {
	p := &Proxy{}
	if err := n.Do(func() error {
		// The socket belongs to the namespace of the thread that creates it.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		p.l = l
		return err
	}); err != nil {
		return nil, fmt.Errorf("listen in node netns: %w", err)
	}
	p.Addr = p.l.Addr().String()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := p.l.Accept()
			if err != nil {
				return
			}
			go forward(c, target)
		}
	}()
	return p, nil
}

func forward(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, up); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}

// Close stops accepting.
func (p *Proxy) Close() { p.l.Close(); p.wg.Wait() }

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
