package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestHelpLooksLikeAKubernetesComponent: `--flag` style, grouped by what they configure, every
// flag the chart passes present.
func TestHelpLooksLikeAKubernetesComponent(t *testing.T) {
	var out bytes.Buffer
	cmd := newCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{"Node identity flags:", "BGP flags:", "IPAM flags:", "Dataplane flags:", "Health and observability flags:", "Logging flags:",
		"--node-name string", "--namespace string", "--bgp string", "--bgp-address string", "--health-addr string", "--metrics-addr string", "--run-dir string",
		"--cni-kubeconfig string", "--log-level string", "--gobgp-api string", "--mtu int", "install-cni"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "\n  -node-name") {
		t.Errorf("single-dash flags in help:\n%s", help)
	}
}

func TestUnknownFlagIsAClearError(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--node-nmae=x"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "unknown flag: --node-nmae") || !strings.Contains(err.Error(), "--help") {
		t.Fatalf("unknown flag: %v", err)
	}
}

// tabby-node links none of client-go's clientset, informer factory or discovery: they register
// every API group of Kubernetes, and every agent would carry their code and resident pages.
func TestLinksNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/discovery", "k8s.io/client-go/applyconfigurations"} {
			if pkg == banned || strings.HasPrefix(pkg, banned+"/") {
				t.Errorf("tabby-node links %s", pkg)
			}
		}
	}
}
