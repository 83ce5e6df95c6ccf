// Package netpol judges tabby's NetworkPolicy enforcement against an independent
// implementation of the semantics. The oracle (hack/netpol/oracle, its own Go module around
// cyclonus's matcher) says which connections the policies allow; this package builds and runs
// it, describes the truth-table cluster (namespaces x, y, z with pods a, b, c), writes the
// policy cases as Go values, applies them through the API server of a hack/lab lab and probes
// every pod pair, port and protocol until the dataplane agrees with the oracle or a deadline
// passes.
package netpol

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/testenv"
)

// The oracle's JSON, mirrored (the oracle is another module: no types to share).

// OracleInput is what the oracle judges.
type OracleInput struct {
	Policies   []networkingv1.NetworkPolicy `json:"policies"`
	Namespaces map[string]map[string]string `json:"namespaces"`
	Pods       []OraclePod                  `json:"pods"`
	Probes     []OracleProbe                `json:"probes"`
}

// OraclePod is a pod as the oracle sees it.
type OraclePod struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
	IP        string            `json:"ip"`
	Ports     []OraclePort      `json:"ports"`
}

// OraclePort is a container port.
type OraclePort struct {
	Name     string          `json:"name"`
	Port     int             `json:"port"`
	Protocol corev1.Protocol `json:"protocol"`
}

// OracleProbe is one connection to judge: From is "namespace/name" or an address.
type OracleProbe struct {
	From     string          `json:"from"`
	To       string          `json:"to"`
	Port     int             `json:"port"`
	Protocol corev1.Protocol `json:"protocol"`
}

// Verdict is the oracle's answer for one probe.
type Verdict struct {
	Allowed bool   `json:"allowed"`
	Ingress bool   `json:"ingress"`
	Egress  bool   `json:"egress"`
	Why     string `json:"why"`
}

// Oracle is a built oracle command.
type Oracle struct {
	Path string
}

var buildMu sync.Mutex

// oracleBuildFlags are part of the cached binary's name (through sourceHash).
var oracleBuildFlags = []string{"-trimpath", "-ldflags=-s -w"}

// BuildOracle builds the oracle once per version of its sources into the tools cache
// ($TABBY_CACHE/bin/netpol-oracle-<hash>) with the module proxy (it pins cyclonus and the
// Kubernetes libraries cyclonus builds with, older than tabby's) and returns it.
func BuildOracle(ctx context.Context) (*Oracle, error) {
	repo, err := lab.FindRepo()
	if err != nil {
		return nil, err
	}
	src := filepath.Join(repo, "hack", "netpol", "oracle")
	sum, err := sourceHash(src)
	if err != nil {
		return nil, err
	}
	dir := testenv.BinDir()
	path := filepath.Join(dir, "netpol-oracle-"+sum)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return &Oracle{Path: path}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("oracle cache directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".netpol-oracle-*")
	if err != nil {
		return nil, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, oracleBuildFlags...), "-o", tmp.Name(), ".")...)
	cmd.Dir = src
	// Its own module, resolved through the proxy; a go.work elsewhere must not pull it in.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the oracle in %s (needs the Go module proxy the first time): %w\n%s", src, err, out)
	}
	// Rename is atomic: a concurrent build elsewhere leaves one complete binary either way.
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	return &Oracle{Path: path}, nil
}

// sourceHash is a digest of the oracle's module files, so an edited oracle is rebuilt.
func sourceHash(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("oracle sources: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() && (n == "go.mod" || n == "go.sum" || (strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go"))) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "flags %q\n", oracleBuildFlags)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// Judge runs the oracle on in and returns one verdict per probe.
func (o *Oracle) Judge(ctx context.Context, in OracleInput) ([]Verdict, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, o.Path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(raw), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("oracle: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var out struct {
		Verdicts []Verdict `json:"verdicts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("oracle output: %w", err)
	}
	if len(out.Verdicts) != len(in.Probes) {
		return nil, fmt.Errorf("oracle: %d verdicts for %d probes", len(out.Verdicts), len(in.Probes))
	}
	return out.Verdicts, nil
}
