package promtext

import "testing"

func TestParse(t *testing.T) {
	text := `# HELP tabby_typha_watches Open watches.
# TYPE tabby_typha_watches gauge
tabby_typha_watches{resource="pods"} 3
tabby_typha_watches{resource="ipamblocks"} 2
tabby_felix_apply_duration_seconds_bucket{le="0.05"} 7
tabby_datastore_via_typha 1
other 9
`
	m := Parse(text, "tabby_typha_watches", "tabby_datastore_via_typha")
	if w := ByLabel(m["tabby_typha_watches"], "resource"); w["pods"] != 3 || w["ipamblocks"] != 2 || len(w) != 2 {
		t.Errorf("watches by resource: %v", w)
	}
	if v := Sum(m["tabby_datastore_via_typha"], nil); v != 1 {
		t.Errorf("an unlabelled sample: %v", v)
	}
	if _, ok := m["other"]; ok {
		t.Error("a metric not asked for was read")
	}
	if s := Sum(m["tabby_typha_watches"], func(l map[string]string) bool { return l["resource"] == "pods" }); s != 3 {
		t.Errorf("sum of pods: %v", s)
	}
}
