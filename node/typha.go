package node

import (
	"log/slog"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/apis/client"
)

// withTypha sends the informers of the cluster-wide kinds through tabby-typha when one is
// configured; writes, the node's own pods and the BGP Secrets stay on the API server.
func withTypha(c *client.Client, restCfg *rest.Config, cfg Config, log *slog.Logger) (*client.Client, error) {
	var endpoints = client.StaticEndpoints(cfg.TyphaAddrs)
	switch {
	case cfg.TyphaService != "":
		ns, name, _ := strings.Cut(cfg.TyphaService, "/") // Validate checked the form
		endpoints = c.ServiceEndpoints(ns, name, "typha")
	case len(cfg.TyphaAddrs) == 0:
		return c, nil
	}
	log.Info("cluster-wide watches through tabby-typha", "service", cfg.TyphaService, "addrs", cfg.TyphaAddrs)
	return c.WithFanout(restCfg, client.FanoutConfig{Endpoints: endpoints, CAFile: cfg.TyphaCAFile, ServerName: cfg.TyphaServerName,
		Logger: log.With("component", "typha-client")})
}
