package installcni

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

type fixture struct {
	o    Options
	root string
}

func setup(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	_, file, _, _ := runtime.Caller(0)
	tmpl := filepath.Join(filepath.Dir(file), "..", "..", "charts", "tabby", "files", "10-tabby.conflist.template")
	o := Options{
		NodeName: "node-a", MTU: 1380,
		SrcBinDir: filepath.Join(root, "src"), Plugins: []string{"tabby", "tabby-ipam"},
		HostBinDir: filepath.Join(root, "host/opt/cni/bin"), HostNetDir: filepath.Join(root, "host/etc/cni/net.d"),
		ConfName: "10-tabby.conflist", ConfTemplate: tmpl, KubeconfigName: "tabby-kubeconfig",
		HostKubeconfigPath: "/etc/cni/net.d/tabby-kubeconfig",
		ServiceAccountDir:  filepath.Join(root, "sa"), APIServer: "https://10.96.0.1:443",
	}
	for dir, files := range map[string]map[string]string{
		o.SrcBinDir:         {"tabby": "#!plugin tabby", "tabby-ipam": "#!plugin tabby-ipam"},
		o.ServiceAccountDir: {"token": "tok-123\n", "ca.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for n, c := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return fixture{o: o, root: root}
}

func TestRunInstallsPluginsConfigAndKubeconfig(t *testing.T) {
	f := setup(t)
	// An older plugin on the host is replaced.
	if err := os.MkdirAll(f.o.HostBinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.o.HostBinDir, "tabby"), []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), f.o); err != nil {
		t.Fatal(err)
	}
	for _, p := range f.o.Plugins {
		st, err := os.Stat(filepath.Join(f.o.HostBinDir, p))
		if err != nil || st.Mode().Perm() != 0o755 {
			t.Fatalf("plugin %s: %v %v", p, st, err)
		}
		b, _ := os.ReadFile(filepath.Join(f.o.HostBinDir, p))
		if string(b) != "#!plugin "+p {
			t.Errorf("plugin %s content %q", p, b)
		}
	}
	conf, err := os.ReadFile(filepath.Join(f.o.HostNetDir, "10-tabby.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Name    string           `json:"name"`
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(conf, &list); err != nil {
		t.Fatalf("conflist: %v\n%s", err, conf)
	}
	p := list.Plugins[0]
	if list.Name != "k8s-pod-network" || p["nodename"] != "node-a" || p["mtu"] != float64(1380) || p["kubeconfig"] != "/etc/cni/net.d/tabby-kubeconfig" {
		t.Errorf("conflist %s", conf)
	}
	kcPath := filepath.Join(f.o.HostNetDir, "tabby-kubeconfig")
	st, err := os.Stat(kcPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig mode: %v %v", st, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kcPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.96.0.1:443" || cfg.BearerToken != "tok-123" || !strings.Contains(string(cfg.CAData), "BEGIN CERTIFICATE") {
		t.Errorf("kubeconfig: host %s token %q ca %q", cfg.Host, cfg.BearerToken, cfg.CAData)
	}
	// No temporaries left behind.
	for _, d := range []string{f.o.HostBinDir, f.o.HostNetDir} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Errorf("temporary %s left in %s", e.Name(), d)
			}
		}
	}
	// Token rotation: a rewrite picks up the new token.
	if err := os.WriteFile(filepath.Join(f.o.ServiceAccountDir, "token"), []byte("tok-456"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteKubeconfig(context.Background(), f.o); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := clientcmd.BuildConfigFromFlags("", kcPath); cfg.BearerToken != "tok-456" {
		t.Errorf("token after refresh %q", cfg.BearerToken)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	for name, mutate := range map[string]func(f *fixture){
		"broken template": func(f *fixture) {
			p := filepath.Join(f.root, "bad.template")
			_ = os.WriteFile(p, []byte(`{"name": "x", "plugins": [ {"type": "tabby", "mtu": __CNI_MTU__ `), 0o644)
			f.o.ConfTemplate = p
		},
		"no node name": func(f *fixture) { f.o.NodeName = "" },
		"mtu":          func(f *fixture) { f.o.MTU = 100 },
	} {
		t.Run(name, func(t *testing.T) {
			f := setup(t)
			mutate(&f)
			err := Run(context.Background(), f.o)
			if err == nil {
				t.Fatal("Run succeeded")
			}
			if _, serr := os.Stat(filepath.Join(f.root, "host")); serr == nil {
				t.Errorf("host directories written despite %v", err)
			}
		})
	}
	f := setup(t)
	f.o.SrcBinDir = filepath.Join(f.root, "missing")
	if err := Run(context.Background(), f.o); err == nil || !strings.Contains(err.Error(), "install plugin tabby") {
		t.Fatalf("missing plugin: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.o.HostNetDir, "10-tabby.conflist")); err == nil {
		t.Errorf("conflist written although a plugin is missing")
	}
}
