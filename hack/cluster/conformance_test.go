package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// e2e.test's JUnit report lists every spec of the suite: those the focus left out are skipped
// with no reason and are not results; a spec that skipped itself, one that failed and one that
// passed are.
func TestReadJUnit(t *testing.T) {
	dir := t.TempDir()
	const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5">
  <testsuite name="Kubernetes e2e suite" tests="5">
    <testcase name="[SynchronizedBeforeSuite]" status="passed" time="1"></testcase>
    <testcase name="[It] [sig-network] Services should serve a basic endpoint from pods [Conformance]" status="passed" time="12.5"></testcase>
    <testcase name="[It] [sig-network] Services should be rejected when no endpoints exist" status="failed" time="3">
      <failure type="failed">[FAILED] connection refused
more</failure>
    </testcase>
    <testcase name="[It] [sig-network] Services should work after restarting kube-proxy [Disruptive]" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] [sig-network] Services should preserve source pod IP for traffic thru service cluster IP [LinuxOnly]" status="skipped" time="0.1">
      <skipped message="skipped - Requires at least 3 nodes (not 2)"></skipped>
    </testcase>
  </testsuite>
</testsuites>`
	if err := os.WriteFile(filepath.Join(dir, "junit_01.xml"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readJUnit(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"[It] [sig-network] Services should be rejected when no endpoints exist":                                    "failed",
		"[It] [sig-network] Services should preserve source pod IP for traffic thru service cluster IP [LinuxOnly]": "skipped",
		"[It] [sig-network] Services should serve a basic endpoint from pods [Conformance]":                         "passed",
	}
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(res), len(want), res)
	}
	for _, r := range res {
		if want[r.Name] != r.Status {
			t.Errorf("%s: %s, want %q", r.Name, r.Status, want[r.Name])
		}
		if r.Status == "failed" && r.Message != "[FAILED] connection refused" {
			t.Errorf("failure message %q", r.Message)
		}
	}
}
