package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/tabbynet/tabby/apis/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

const (
	dashboardFile = "../../charts/tabby/files/tabby-dashboard.json"
	alertsFile    = "../../charts/tabby/files/tabby-alerts.yaml"
)

// TestDashboards: the chart's Grafana dashboard and alert rules against a real Prometheus
// scraping three tabby-nodes. promtool accepts the rules; every panel's expression returns
// data (no panel is dead on arrival); every alert's signal (its expression without the
// threshold) returns data, but the BGP session alert's, empty on a healthy cluster. Provoked,
// alerts go off (pending: their `for` has not run out): an IPPool filled, a node killed.
func TestDashboards(t *testing.T) {
	if out, err := exec.Command("promtool", "check", "rules", alertsFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	panels := dashboardExprs(t)
	alerts := alertRules(t)

	// The chart's pool leaves room for one the test fills.
	l := startLab(t, lab.Options{HelmSet: []string{"ipPool.cidr=10.244.0.0/17"}, FlowLogs: true})
	ctx := testCtx(t, 4*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(3)...)
	addPodsPerNode(t, ctx, l, nodes, 2)
	for _, n := range nodes {
		if err := n.WaitPeers(ctx, 30*time.Second, peersExcept(nodes, n)...); err != nil {
			t.Fatal(err)
		}
	}
	prom := startPrometheus(t, ctx, scrapeNodes(t, nodes), alertsFile)
	waitQuery(t, ctx, prom, "every node scraped", `count(up == 1) == 3`, 60*time.Second)

	// Rates need two scrapes in their window: the first look comes soon, the deadline leaves
	// a loaded machine time.
	queries := map[string]string{}
	for title, exprs := range panels {
		for _, e := range exprs {
			queries[e] = "panel " + title
		}
	}
	const sessionDown = "TabbyBGPSessionDown"
	var sessionSignal string
	for _, a := range alerts {
		signal, ok := withoutThreshold(a.Expr)
		if !ok {
			t.Errorf("alert %s: expression %q is not `<signal> > <threshold>`", a.Alert, a.Expr)
			continue
		}
		if a.Alert == sessionDown {
			sessionSignal = signal
			continue
		}
		queries[signal] = "alert " + a.Alert
	}
	if empty := emptyQueries(t, ctx, prom, queries, 90*time.Second); len(empty) > 0 {
		t.Errorf("%d of %d expressions return no data from the lab:\n  %s", len(empty), len(queries), strings.Join(empty, "\n  "))
	}
	if sessionSignal == "" {
		t.Fatalf("%s holds no %s", alertsFile, sessionDown)
	}
	if got, err := prom.query(ctx, sessionSignal); err != nil || len(got) != 0 {
		t.Errorf("alert %s: %q on a healthy lab returns %v (%v), want nothing", sessionDown, sessionSignal, got, err)
	}

	// A connection policy denies is counted under its verdict.
	web, _, batch := shopPolicy(t, ctx, l, nodes[0], nodes[1], nodes[2])
	waitQuery(t, ctx, prom, "a denied connection counted by the flow log",
		`sum(tabby_felix_flow_connections_total{verdict="deny"}) > 0`, 60*time.Second, func() {
			// Refused once felix enforces the policy, which is what the counter waits for;
			// a probe that gets through before that is not counted as denied.
			_ = lab.Probe(ctx, batch.NS, netip.AddrPortFrom(web.IP, 80), corev1.ProtocolTCP, probeTimeout)
		})

	// A pool of 8 addresses given 8 pods is over 90 %.
	fillPool(t, ctx, l, "nearly-full", netip.MustParsePrefix("10.244.250.0/29"), nodes[0].Name)
	waitQuery(t, ctx, prom, "TabbyIPPoolNearlyFull pending or firing with a pool full",
		`ALERTS{alertname="TabbyIPPoolNearlyFull",pool="nearly-full"}`, 60*time.Second)
	// node-3 killed, node-1's and node-2's sessions to it are down.
	if err := nodes[2].Kill(); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, ctx, prom, sessionDown+" pending or firing on node-1 and node-2 with node-3 killed",
		fmt.Sprintf(`count(ALERTS{alertname=%q}) == 2`, sessionDown), 60*time.Second)
}

// fillPool creates a pool of cidr, one block, and takes every address of it with pods on node.
func fillPool(t *testing.T, ctx context.Context, l *lab.Lab, name string, cidr netip.Prefix, node string) {
	t.Helper()
	pool := &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.IPPoolSpec{CIDR: cidr.String(), BlockSize: cidr.Bits()}}
	if _, err := l.Client.IPPools().Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var specs []lab.PodSpec
	for i := range 1 << (32 - cidr.Bits()) {
		specs = append(specs, lab.PodSpec{Name: fmt.Sprintf("%s-%d", name, i), Node: node,
			Annotations: map[string]string{v1.AnnotationIPv4Pools: `["` + name + `"]`}})
	}
	if _, err := l.AddPods(ctx, specs...); err != nil {
		t.Fatalf("fill pool %s: %v", name, err)
	}
}

// dashboardExprs returns every panel's expressions by panel title, with Grafana's variables
// as Grafana fills them in: every node, a rate interval of a few scrapes.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	vars := strings.NewReplacer(`$node`, `.*`, `$__rate_interval`, `15s`)
	out := map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out[p.Title] = append(out[p.Title], vars.Replace(tg.Expr))
		}
	}
	return out
}

type alertRule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no alert", alertsFile)
	}
	return out
}

var threshold = regexp.MustCompile(`^(?s)(.*\S)\s*(?:>|>=|<|<=)\s*[0-9.]+\s*$`)

// withoutThreshold is an alert's signal: its expression less the final comparison with a number.
func withoutThreshold(expr string) (string, bool) {
	m := threshold.FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// emptyQueries polls every query until each has returned data once, and returns, named, those
// that never did within d.
func emptyQueries(t *testing.T, ctx context.Context, p *prometheus, queries map[string]string, d time.Duration) []string {
	t.Helper()
	pending := map[string]string{}
	for q, what := range queries {
		pending[q] = what
	}
	deadline := time.Now().Add(d)
	lastErr := map[string]error{}
	for {
		for q := range pending {
			got, err := p.query(ctx, q)
			lastErr[q] = err
			if err == nil && len(got) > 0 {
				delete(pending, q)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	var out []string
	for q, what := range pending {
		s := fmt.Sprintf("%s: %s", what, q)
		if lastErr[q] != nil {
			s += fmt.Sprintf(" (%v)", lastErr[q])
		}
		out = append(out, s)
	}
	sort.Strings(out)
	t.Logf("%d of %d expressions returned data", len(queries)-len(out), len(queries))
	return out
}

// waitQuery waits until q returns data (a comparison that holds), doing each of provoke
// before every look.
func waitQuery(t *testing.T, ctx context.Context, p *prometheus, what, q string, d time.Duration, provoke ...func()) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, f := range provoke {
			f()
		}
		got, err := p.query(ctx, q)
		if err == nil && len(got) > 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: %s returned %v (%v) for %s", what, q, got, err, d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
