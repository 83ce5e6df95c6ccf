package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// prometheus is a real Prometheus server (Debian's, from `make deps`) scraping the lab's
// tabby-nodes and evaluating rule files, on loopback of the test machine.
type prometheus struct {
	url string
	log string
}

// scrapeNodes serves each node's /metrics on a loopback port of the test machine: the agents
// listen on their namespace's loopback, where a Prometheus outside cannot reach them. It returns
// the addresses by node name.
func scrapeNodes(t *testing.T, nodes []*lab.Node) map[string]string {
	t.Helper()
	targets := map[string]string{}
	for _, n := range nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := n.MetricsPath(r.Context(), "/metrics")
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write(body)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		targets[n.Name] = ln.Addr().String()
	}
	return targets
}

// startPrometheus runs Prometheus with every target scraped each second (its instance label is
// the node's name, as a node's address would be in a cluster) and ruleFiles evaluated each
// second, and waits until it answers. It stops when the test ends.
func startPrometheus(t *testing.T, ctx context.Context, targets map[string]string, ruleFiles ...string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not installed (`make deps` installs Debian's): %v", err)
	}
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\nrule_files:\n")
	for _, f := range ruleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "  - %q\n", abs)
	}
	cfg.WriteString("scrape_configs:\n  - job_name: tabby-node\n    static_configs:\n")
	for node, addr := range targets {
		fmt.Fprintf(&cfg, "      - targets: [%q]\n        labels: {instance: %q}\n", addr, node)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "promtool", "check", "config", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s\n%s", err, out, cfg.String())
	}
	addr := freePort(t)
	p := &prometheus{url: "http://" + addr, log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.logTail())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited at start:\n%s", p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready at %s after 60s (%v):\n%s", addr, err, p.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *prometheus) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query.
func (p *prometheus) query(ctx context.Context, q string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string   `json:"resultType"`
			Result     []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, want a vector", q, r.Data.ResultType)
	}
	return r.Data.Result, nil
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
