package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/observe/server"
	"github.com/tabbynet/tabby/typha/auth"
)

// checkObserve refuses an observation endpoint that cannot start.
func (c *Config) checkObserve() error {
	if c.ObserveAddr == "" {
		if c.ObserveAdvertise != "" {
			return fmt.Errorf("--observe-advertise-addr=%s without --observe-addr: the endpoint is off", c.ObserveAdvertise)
		}
		return nil
	}
	if _, _, err := splitPort(c.ObserveAddr); err != nil {
		return fmt.Errorf("--observe-addr=%q: %w", c.ObserveAddr, err)
	}
	if c.ObserveAdvertise != "" {
		if _, _, err := splitPort(c.ObserveAdvertise); err != nil {
			return fmt.Errorf("--observe-advertise-addr=%q: %w", c.ObserveAdvertise, err)
		}
	}
	if c.ObserveCertFile == "" || c.ObserveKeyFile == "" {
		return fmt.Errorf("--observe-addr=%s needs --observe-tls-cert-file and --observe-tls-key-file: the endpoint serves HTTPS only", c.ObserveAddr)
	}
	return nil
}

func splitPort(hostPort string) (string, int, error) {
	host, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", 0, errors.New("want HOST:PORT or :PORT")
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port %q: want 1..65535", p)
	}
	return host, port, nil
}

// observeAdvertised is the address readers reach the endpoint at, recorded on the Node ("" when
// off): --observe-advertise-addr, else the listening address if it names a host, else the
// node's BGP address (IPv4 first) with the listening port.
func (c *Config) observeAdvertised(addrs ipfamily.Pair[netip.Prefix]) string {
	if c.ObserveAddr == "" {
		return ""
	}
	if c.ObserveAdvertise != "" {
		return c.ObserveAdvertise
	}
	host, port, _ := splitPort(c.ObserveAddr)
	if ip, err := netip.ParseAddr(host); host != "" && (err != nil || !ip.IsUnspecified()) {
		return c.ObserveAddr
	}
	for _, fam := range ipfamily.All {
		if a := addrs.Get(fam); a.IsValid() {
			return net.JoinHostPort(a.Addr().String(), strconv.Itoa(port))
		}
	}
	return ""
}

// serveObserve starts the observation endpoint (nil when off): the node's flow log and BGP
// status, to callers the API server vouches for.
func (a *Agent) serveObserve(restCfg *rest.Config) (*http.Server, error) {
	if a.cfg.ObserveAddr == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(a.cfg.ObserveCertFile, a.cfg.ObserveKeyFile)
	if err != nil {
		return nil, fmt.Errorf("observation endpoint: load the serving certificate: %w", err)
	}
	reviewer, err := auth.New(restCfg)
	if err != nil {
		return nil, fmt.Errorf("observation endpoint: %w", err)
	}
	cfg := server.Config{Node: a.cfg.NodeName, Auth: reviewer, Log: a.log.With("component", "observe"),
		Flows: a.felix.FlowLog(), FlowsEnabled: a.flowLogsOn.Load}
	if a.bgp != nil {
		cfg.BGP = a.bgp
	}
	srv := &http.Server{Handler: server.New(cfg), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	l, err := net.Listen("tcp", a.cfg.ObserveAddr)
	if err != nil {
		return nil, fmt.Errorf("observation endpoint: listen on %s: %w", a.cfg.ObserveAddr, err)
	}
	go func() {
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("observation endpoint stopped", "addr", a.cfg.ObserveAddr, "error", err)
		}
	}()
	a.log.Info("observation endpoint serves flows and BGP status", "addr", a.cfg.ObserveAddr)
	return srv, nil
}
