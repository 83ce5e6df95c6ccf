package cluster

import (
	"strings"
	"testing"
)

// The suite's `go test -v` output: each top-level subtest is one result, nested subtests are
// not; a test named in skip passed without running and is reported skipped; a failed test
// carries its first failed probe other than SCTP, if any.
func TestParseGoTestV(t *testing.T) {
	const out = `=== RUN   TestConformanceProfiles
=== RUN   TestConformanceProfiles/CNPAdminTierEgressSCTP
    suite.go:216: Skipping CNPAdminTierEgressSCTP
--- PASS: TestConformanceProfiles/CNPAdminTierEgressSCTP (0.00s)
=== RUN   TestConformanceProfiles/CNPAdminTierGress
=== RUN   TestConformanceProfiles/CNPAdminTierGress/Should_deny_traffic
    helper.go:110: FAILED Command was [/agnhost connect --timeout=3s --protocol=sctp 10.244.0.5:9003]
    helper.go:112: Expected connection to fail from a/b to 10.244.0.5, but instead it successfully connected.
        Error:      Should be true
    --- FAIL: TestConformanceProfiles/CNPAdminTierGress/Should_deny_traffic (10.50s)
=== RUN   TestConformanceProfiles/CNPAdminTierGress/Should_allow_traffic
    helper.go:70: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.244.0.6:80]
    helper.go:71: Expected connection to succeed from a/b to 10.244.0.6, but instead it miserably failed. stderr: TIMEOUT
    --- FAIL: TestConformanceProfiles/CNPAdminTierGress/Should_allow_traffic (10.50s)
--- FAIL: TestConformanceProfiles/CNPAdminTierGress (12.25s)
=== RUN   TestConformanceProfiles/CNPAdminTierPriorityField
    --- PASS: TestConformanceProfiles/CNPAdminTierPriorityField/Should_allow (1.00s)
--- PASS: TestConformanceProfiles/CNPAdminTierPriorityField (3.00s)
=== RUN   TestConformanceProfiles/CNPAdminTierEgressNodePeers
    suite.go:210: Skipping CNPAdminTierEgressNodePeers: suite does not support ClusterNetworkPolicyEgressNodePeers
--- SKIP: TestConformanceProfiles/CNPAdminTierEgressNodePeers (0.00s)
--- FAIL: TestConformanceProfiles (20.00s)
`
	res := parseGoTestV(strings.NewReader(out), []string{"CNPAdminTierEgressSCTP"})
	want := map[string]string{
		"CNPAdminTierEgressSCTP": "skipped", "CNPAdminTierGress": "failed",
		"CNPAdminTierPriorityField": "passed", "CNPAdminTierEgressNodePeers": "skipped",
	}
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(res), len(want), res)
	}
	for _, r := range res {
		if want[r.Name] != r.Status {
			t.Errorf("%s: %s, want %s", r.Name, r.Status, want[r.Name])
		}
		if r.Name == "CNPAdminTierGress" && !strings.HasPrefix(r.Message, "helper.go:70: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.244.0.6:80] helper.go:71: Expected connection to succeed") {
			t.Errorf("failure message %q", r.Message)
		}
	}
	if n := SCTPFailures(res); n != 0 {
		t.Errorf("%d failures only at SCTP probes, want 0", n)
	}
	res = parseGoTestV(strings.NewReader(strings.ReplaceAll(out, "protocol=tcp", "protocol=sctp")), nil)
	if n := SCTPFailures(res); n != 1 {
		t.Errorf("%d failures only at SCTP probes, want 1", n)
	}
}
