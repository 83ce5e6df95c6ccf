package cluster

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tabbynet/tabby/internal/testenv"
)

// ConformanceFocus selects the upstream sig-network conformance tests: the pod network
// (Networking Granular Checks: Pods), Services through kube-proxy over it (the tests reach them
// by name through the cluster's CoreDNS), DNS (names of Services and pods through that CoreDNS,
// from agnhost and from the glibc prober image), HostPort, the proxy subresources, and the API tests of
// Services, Endpoints and EndpointSlices; and the NetworkPolicy suite ("Netpol"), which is not
// part of conformance (NetworkPolicy is optional for a CNI) but is what tabby's felix enforces.
var ConformanceFocus = []string{`\[sig-network\].*\[Conformance\]`, `\[sig-network\] Netpol `}

// ConformanceSkip leaves out what this cluster cannot run, whatever the CNI: tests that must run
// alone or disrupt the cluster, and tests whose images are not built here (no registry is
// reachable): the Endpoints/EndpointSlice tests "for Pods matching a Service" run nginx. The
// SCTP connectivity tests need the kernel's sctp module, which this machine's kernel lacks (the
// NetworkPolicy tests that only name SCTP in a policy still run).
var ConformanceSkip = []string{`\[Disruptive\]`, `\[Serial\]`, `\[Flaky\]`, `for Pods matching a Service`, `\[Feature:SCTPConnectivity\]`}

// Result is one upstream test's outcome.
type Result struct {
	Name    string
	Status  string // passed, failed, skipped
	Time    time.Duration
	Message string
}

// RunConformance runs e2e.test against the cluster with the given focus and returns each
// matched test's result. out receives e2e.test's own output.
func (c *Cluster) RunConformance(ctx context.Context, focus, skip []string, out io.Writer) ([]Result, error) {
	bin, err := cacheBinary("e2e.test")
	if err != nil {
		return nil, err
	}
	report := filepath.Join(c.Lab.Dir, "e2e-report")
	if err := os.MkdirAll(report, 0o755); err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + c.Kubeconfig, "--provider=skeleton", "--kubectl-path=" + testenv.Kubectl(),
		"--ginkgo.focus=" + strings.Join(focus, "|"), "--ginkgo.skip=" + strings.Join(skip, "|"),
		"--report-dir=" + report, "--ginkgo.no-color", "--ginkgo.timeout=40m",
		"--num-nodes=" + fmt.Sprint(len(c.Nodes)), "--allowed-not-ready-nodes=0",
		// Up has waited for the one add-on (CoreDNS) already.
		"--minStartupPods=0",
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	// e2e.test exits non-zero when a test fails; the report says which.
	runErr := cmd.Run()
	res, err := readJUnit(report)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("e2e.test report: %w", err), runErr)
	}
	if len(res) == 0 && runErr != nil {
		return nil, fmt.Errorf("e2e.test: %w", runErr)
	}
	return res, nil
}

// readJUnit reads the results of the specs that ran or were skipped by the focus' own
// conditions from e2e.test's JUnit reports (specs the focus filtered out are not listed).
func readJUnit(dir string) ([]Result, error) {
	files, err := filepath.Glob(filepath.Join(dir, "junit*.xml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no junit report in %s", dir)
	}
	type failure = junitMessage
	type testcase struct {
		Name    string   `xml:"name,attr"`
		Status  string   `xml:"status,attr"`
		Time    float64  `xml:"time,attr"`
		Skipped *failure `xml:"skipped"`
		Failure *failure `xml:"failure"`
		Error   *failure `xml:"error"`
	}
	type suites struct {
		Cases  []testcase `xml:"testsuite>testcase"`
		Direct []testcase `xml:"testcase"`
	}
	var out []Result
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var s suites
		if err := xml.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("parse %s: %w", f, err)
		}
		for _, tc := range append(s.Cases, s.Direct...) {
			// Ginkgo lists the suite's own setup nodes too; they are not tests.
			if strings.HasPrefix(tc.Name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(tc.Name, "[SynchronizedAfterSuite]") ||
				strings.HasPrefix(tc.Name, "[BeforeSuite]") || strings.HasPrefix(tc.Name, "[AfterSuite]") || strings.HasPrefix(tc.Name, "[ReportAfterSuite]") ||
				strings.HasPrefix(tc.Name, "[ReportBeforeSuite]") {
				if tc.Failure == nil && tc.Error == nil {
					continue
				}
			}
			r := Result{Name: tc.Name, Time: time.Duration(tc.Time * float64(time.Second))}
			switch {
			case tc.Failure != nil:
				r.Status, r.Message = "failed", firstLine(tc.Failure.Message+"\n"+tc.Failure.Text)
			case tc.Error != nil:
				r.Status, r.Message = "failed", firstLine(tc.Error.Message+"\n"+tc.Error.Text)
			case tc.Skipped != nil || tc.Status == "skipped" || tc.Status == "pending":
				// Ginkgo reports a spec the focus or skip left out as skipped with no reason
				// ("skipped"); one that skipped itself says why ("skipped - …").
				if m := strings.TrimSpace(tc.Skipped.msg()); m == "skipped" || strings.Contains(m, "filtered out") {
					continue
				}
				r.Status, r.Message = "skipped", firstLine(tc.Skipped.msg())
			default:
				r.Status = "passed"
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// Summary is the table of results and the closing line `conformance: N passed, N failed, N
// skipped`.
func Summary(res []Result) (string, bool) { return SummaryOf("conformance", res) }

// SummaryOf is Summary with the closing line's label: `label: N passed, N failed, N skipped`.
func SummaryOf(label string, res []Result) (string, bool) {
	var b strings.Builder
	counts := map[string]int{}
	for _, r := range res {
		counts[r.Status]++
		fmt.Fprintf(&b, "%-7s %6s  %s\n", strings.ToUpper(r.Status), r.Time.Round(time.Second), r.Name)
		if r.Message != "" && r.Status != "passed" {
			fmt.Fprintf(&b, "                %s\n", r.Message)
		}
	}
	fmt.Fprintf(&b, "%s: %d passed, %d failed, %d skipped\n", label, counts["passed"], counts["failed"], counts["skipped"])
	return b.String(), counts["failed"] == 0 && counts["passed"] > 0
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func (m *junitMessage) msg() string {
	if m == nil {
		return ""
	}
	return m.Message + "\n" + m.Text
}
