// Command oracle judges Kubernetes NetworkPolicy connectivity without any of tabby's code: it
// reads policies, namespaces, pods and probes as JSON on stdin and writes one verdict per probe
// as JSON on stdout. The decisions are cyclonus's NetworkPolicy matcher
// (github.com/mattfenwick/cyclonus/pkg/matcher), with label selectors evaluated by apimachinery
// (selectors.go says why). It is its own Go module because cyclonus v0.5.6 imports client-go's
// GCP auth plugin, which tabby's client-go no longer has; the e2e tests build it with `go build`.
//
// Input:
//
//	{"policies":   [networking.k8s.io/v1 NetworkPolicy, ...],
//	 "namespaces": {"x": {"kubernetes.io/metadata.name": "x", ...}, ...},
//	 "pods":       [{"namespace": "x", "name": "a", "labels": {...}, "ip": "10.244.0.5",
//	                 "ports": [{"name": "serve-80-tcp", "port": 80, "protocol": "TCP"}]}, ...],
//	 "probes":     [{"from": "x/a" or "203.0.113.9", "to": "y/b", "port": 80, "protocol": "TCP"}, ...]}
//
// Output: {"verdicts": [{"allowed": true, "ingress": true, "egress": true, "why": "..."}, ...]}
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

func run(r io.Reader, w io.Writer) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	// Unknown keys at the top are a caller's typo (a misspelt "probes" would judge nothing);
	// inside policies they may be fields newer than the k8s.io/api this module builds with,
	// which the oracle ignores as any older client would.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return fmt.Errorf("decode input: %w", err)
	}
	for k := range top {
		switch k {
		case "policies", "namespaces", "pods", "probes":
		default:
			return fmt.Errorf("decode input: unknown key %q (want policies, namespaces, pods, probes)", k)
		}
	}
	var in Input
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("decode input: %w", err)
	}
	out, err := Evaluate(in)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(out)
}
