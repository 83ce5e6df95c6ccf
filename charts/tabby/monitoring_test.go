package chart_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestTemplateDashboardsAndAlerts(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system",
		"--set", "dashboards.enabled=true,dashboards.namespace=monitoring,prometheusRule.enabled=true,prometheusRule.labels.release=kps"))
	cm := decode[corev1.ConfigMap](t, objs, "ConfigMap/tabby-dashboards")
	if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap in %q with labels %v: want monitoring, grafana_dashboard=1", cm.Namespace, cm.Labels)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["tabby-node.json"]), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, "tabby_") {
				t.Errorf("panel %q: expression %q reads no tabby metric", p.Title, tg.Expr)
			}
			exprs++
		}
	}
	if dash.UID != "tabby-node" || exprs == 0 {
		t.Errorf("dashboard uid %q with %d expressions", dash.UID, exprs)
	}

	// The PrometheusRule carries the rules file promtool checks, unchanged.
	var rule struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     json.RawMessage   `json:"spec"`
	}
	if err := yaml.Unmarshal(objs["PrometheusRule/tabby"], &rule); err != nil {
		t.Fatalf("PrometheusRule: %v", err)
	}
	if rule.Metadata.Labels["release"] != "kps" {
		t.Errorf("PrometheusRule labels %v", rule.Metadata.Labels)
	}
	raw, err := os.ReadFile("files/tabby-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(file, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rule.Spec, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("PrometheusRule spec differs from files/tabby-alerts.yaml:\n%s\n%s", rule.Spec, file)
	}
}
