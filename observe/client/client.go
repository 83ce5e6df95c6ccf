// Package client reads every node's observation endpoint (observe/server): it finds the nodes
// from the API server (each tabby-node records its endpoint on its Node), verifies their
// certificate against the chart's CA and presents the caller's own token, so a node serves the
// caller only what RBAC lets it see. tabbyctl flows and the web view read the cluster through
// it.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/observe"
)

// Options say how to reach and trust the nodes.
type Options struct {
	// CAFile (PEM) verifies the nodes' serving certificate; empty: ca.crt of the Secret the
	// chart writes (observe.CASecretSelector).
	CAFile string
	// Token is the bearer token the nodes review; empty: the kubeconfig's credentials (a
	// token, a token file or an exec plugin that returns one).
	Token string
	// ServerName is the name the nodes' certificate is issued to; observe.ServerName when
	// empty.
	ServerName string
	// OnNodeError hears, as it happens, of every node that failed while the others went on:
	// a node without the endpoint, one that refused the token, a stream that broke (a
	// following stream is then opened again). nil: Flows returns them, joined, at its end.
	OnNodeError func(node string, err error)
	// Timeout bounds connecting to a node and, for BGP, its whole answer; 10 s when zero.
	Timeout time.Duration
}

// Client reads the observation endpoints of a cluster's nodes.
type Client struct {
	opts  Options
	http  *http.Client
	nodes func(ctx context.Context) ([]target, error)
}

// target is one node and its endpoint ("" when it records none).
type target struct {
	node, addr string
}

// NodeError is a node's failure.
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return "node " + e.Node + ": " + e.Err.Error() }
func (e *NodeError) Unwrap() error { return e.Err }

// New reads the CA and credentials for the cluster of cfg.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Client, error) {
	kube, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	ca, err := loadCA(ctx, kube, o.CAFile)
	if err != nil {
		return nil, err
	}
	auth := &rest.Config{Host: cfg.Host, BearerToken: cfg.BearerToken, BearerTokenFile: cfg.BearerTokenFile,
		ExecProvider: cfg.ExecProvider, AuthProvider: cfg.AuthProvider, AuthConfigPersister: cfg.AuthConfigPersister}
	if o.Token != "" {
		auth = &rest.Config{Host: cfg.Host, BearerToken: o.Token}
	}
	if auth.BearerToken == "" && auth.BearerTokenFile == "" && auth.ExecProvider == nil && auth.AuthProvider == nil {
		return nil, errors.New("the kubeconfig's user has no token (a client certificate, which tabby-node cannot review): pass a token (--token, e.g. from `kubectl create token`)")
	}
	c := newClient(o, ca)
	if c.http.Transport, err = rest.HTTPWrappersForConfig(auth, c.http.Transport); err != nil {
		return nil, fmt.Errorf("credentials from the kubeconfig: %w", err)
	}
	c.nodes = func(ctx context.Context) ([]target, error) { return listTargets(ctx, kube) }
	return c, nil
}

func newClient(o Options, ca *x509.CertPool) *Client {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.ServerName == "" {
		o.ServerName = observe.ServerName
	}
	tr := &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: ca, ServerName: o.ServerName, MinVersion: tls.VersionTLS12},
		DialContext:           (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &Client{opts: o, http: &http.Client{Transport: tr}}
}

// loadCA reads file, or ca.crt of the chart's Secret.
func loadCA(ctx context.Context, kube *client.Client, file string) (*x509.CertPool, error) {
	var pem []byte
	from := file
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("CA of the nodes' observation endpoint: %w", err)
		}
		pem = b
	} else {
		secrets, err := kube.Secrets("").List(ctx, metav1.ListOptions{LabelSelector: observe.CASecretSelector})
		if err != nil {
			return nil, fmt.Errorf("find the CA of the nodes' observation endpoint (Secrets labelled %s; or pass its file): %w", observe.CASecretSelector, err)
		}
		for _, s := range secrets.Items {
			if b := s.Data["ca.crt"]; len(b) > 0 {
				pem, from = b, "Secret "+s.Namespace+"/"+s.Name
				break
			}
		}
		if pem == nil {
			return nil, fmt.Errorf("no CA for the nodes' observation endpoint: no Secret labelled %s with a ca.crt (the chart writes it with observe.enabled); pass its file", observe.CASecretSelector)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA of the nodes' observation endpoint (%s): no PEM certificate", from)
	}
	return pool, nil
}

// listTargets reads every Node's endpoint.
func listTargets(ctx context.Context, kube *client.Client) ([]target, error) {
	nodes, err := kube.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	out := make([]target, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		out = append(out, target{node: n.Name, addr: n.Annotations[v1.AnnotationObserveAddress]})
	}
	slices.SortFunc(out, func(a, b target) int { return strings.Compare(a.node, b.node) })
	return out, nil
}

// errNoEndpoint: the node's tabby-node records no endpoint.
var errNoEndpoint = fmt.Errorf("no %s annotation: its tabby-node serves no observation endpoint (--observe-addr empty, the chart's observe.enabled false, or a tabby-node older than it)", v1.AnnotationObserveAddress)

// get asks node t for path; a refusal comes back as an error with the node's own words.
func (c *Client) get(ctx context.Context, t target, path string, q url.Values) (*http.Response, error) {
	if t.addr == "" {
		return nil, errNoEndpoint
	}
	u := url.URL{Scheme: "https", Host: t.addr, Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &refusal{code: resp.StatusCode, msg: fmt.Sprintf("%s answers %d: %s", t.addr, resp.StatusCode, strings.TrimSpace(string(b)))}
	}
	return resp, nil
}

// refusal is a node's answer other than 200: asking again does not change it.
type refusal struct {
	code int
	msg  string
}

func (r *refusal) Error() string { return r.msg }

// onNodes runs f for each target at once.
func onNodes(targets []target, f func(t target)) {
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(t)
		}()
	}
	wg.Wait()
}
