package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/tabbynet/tabby/hack/cluster/images"
)

// ANP conformance: the suite of sigs.k8s.io/network-policy-api (hack/anpconformance), its
// ClusterNetworkPolicy profile with the extended features felix enforces.
const (
	ANPProfile  = "ClusterNetworkPolicy"
	ANPFeatures = "ClusterNetworkPolicy,ClusterNetworkPolicyNamedPorts,ClusterNetworkPolicyEgressNodePeers"
)

// ANPSkipTests are the suite's tests this machine cannot run: SCTP, which its kernel lacks. The
// report lists them as skipped.
var ANPSkipTests = []string{"CNPAdminTierEgressSCTP", "CNPAdminTierIngressSCTP", "CNPBaselineTierEgressSCTP", "CNPBaselineTierIngressSCTP"}

// PrepareANPConformance readies the cluster for the suite: the agnhost its manifests name
// (images.ANPAgnhostRef) imported into every node, and the chart's AdminNetworkPolicy and
// BaselineAdminNetworkPolicy CRDs (network-policy-api v0.1.7, the last release with them)
// without the bundle annotations by which the suite refuses a cluster whose network-policy-api
// CRDs come from more than one release. The CRDs' schemas are untouched.
func (c *Cluster) PrepareANPConformance(ctx context.Context) error {
	for _, crd := range []string{"adminnetworkpolicies.policy.networking.k8s.io", "baselineadminnetworkpolicies.policy.networking.k8s.io"} {
		if _, err := c.Kubectl(ctx, "annotate", "crd", crd, "policy.networking.k8s.io/bundle-version-", "policy.networking.k8s.io/channel-"); err != nil {
			return err
		}
	}
	return c.importANPImages(ctx)
}

func (c *Cluster) importANPImages(ctx context.Context) error {
	agnhost, err := cacheBinary("agnhost")
	if err != nil {
		return err
	}
	coredns, err := cacheBinary("coredns-" + images.CoreDNSVersion)
	if err != nil {
		return err
	}
	as, err := images.WriteArchives(ctx, images.Options{
		Dir: filepath.Join(c.Lab.Dir, "images"), Agnhost: agnhost, CoreDNS: coredns, Only: []string{"agnhost-anp"},
	})
	if err != nil {
		return err
	}
	return c.eachNode(func(n *Node) error { return n.importImages(ctx, []string{as[0].Path}) })
}

// RunANPConformance runs the suite's test binary (built by `go test -c` in hack/anpconformance)
// against the cluster, writes its conformance report to report and its output to out, and
// returns each test's result.
func (c *Cluster) RunANPConformance(ctx context.Context, bin, report, version string, out io.Writer) ([]Result, error) {
	if err := os.MkdirAll(filepath.Dir(report), 0o755); err != nil {
		return nil, err
	}
	args := []string{
		"-test.v", "-test.timeout=90m", "-test.run=TestConformanceProfiles",
		"-conformance-profiles=" + ANPProfile, "-supported-features=" + ANPFeatures,
		"-skip-tests=" + strings.Join(ANPSkipTests, ","), "-report-output=" + report,
		"-organization=tabbynet", "-project=tabby", "-url=https://github.com/tabbynet/tabby",
		"-version=" + version, "-contact=https://github.com/tabbynet/tabby/issues",
		"-additional-info=make conformance-anp: a 2-node cluster of kubelets (hack/cluster), SCTP tests skipped (no SCTP in the kernel)",
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("anp conformance: %w", err)
	}
	done := make(chan []Result, 1)
	go func() { done <- parseGoTestV(io.TeeReader(pr, out), ANPSkipTests) }()
	// The binary exits non-zero when a test fails; the results say which.
	runErr := cmd.Wait()
	pw.Close()
	res := <-done
	if len(res) == 0 {
		return nil, fmt.Errorf("anp conformance: no results: %v", runErr)
	}
	return res, nil
}

var goTestResult = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestConformanceProfiles/(\S+) \(([0-9.]+)s\)`)

// parseGoTestV reads `go test -v` output of the suite: one result per test of the suite (the
// top-level subtests of TestConformanceProfiles), skipped when named in skip (the suite passes
// them without running them), with a failed test's first failed probe (its command and what it
// expected; one other than SCTP if any) or error line as its message.
func parseGoTestV(r io.Reader, skip []string) []Result {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	var res []Result
	firstErr, probe := map[string]string{}, map[string]string{}
	running := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "=== RUN   TestConformanceProfiles/"); ok {
			running, _, _ = strings.Cut(name, "/")
			continue
		}
		// The suite logs the probe's command, then what it expected; a failure without a probe
		// has testify's "Error:" line. A failed probe other than SCTP is the message first.
		if running != "" {
			switch l := strings.TrimSpace(line); {
			case strings.Contains(l, "FAILED Command was"):
				probe[running] = l
			case strings.Contains(l, "Expected connection"):
				msg := strings.TrimSpace(probe[running] + " " + l)
				if prev := firstErr[running]; prev == "" || strings.Contains(prev, "--protocol=sctp") && !strings.Contains(msg, "--protocol=sctp") {
					firstErr[running] = msg
				}
			case strings.Contains(l, "Error:") && firstErr[running] == "":
				firstErr[running] = l
			}
		}
		m := goTestResult.FindStringSubmatch(line)
		if m == nil || strings.Contains(m[2], "/") {
			continue
		}
		var secs float64
		fmt.Sscan(m[3], &secs)
		r := Result{Name: m[2], Time: time.Duration(secs * float64(time.Second))}
		switch {
		case skipped[r.Name]:
			r.Status, r.Message = "skipped", "not run on this machine (no SCTP in the kernel)"
		case m[1] == "PASS":
			r.Status = "passed"
		case m[1] == "SKIP":
			r.Status = "skipped"
		default:
			r.Status, r.Message = "failed", firstErr[r.Name]
		}
		res = append(res, r)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Name < res[j].Name })
	return res
}

// SCTPFailures counts the failed tests whose failed probes were all SCTP: the suite's TCP and
// UDP tests probe SCTP ports too, which a kernel without SCTP cannot reach whatever the policy.
func SCTPFailures(res []Result) int {
	n := 0
	for _, r := range res {
		if r.Status == "failed" && strings.Contains(r.Message, "--protocol=sctp") {
			n++
		}
	}
	return n
}
