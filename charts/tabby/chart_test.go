// Package chart_test checks the Helm chart: lint, rendered objects (default values and the
// route-reflector + ToR values), and a real install/upgrade/uninstall into a real API server.
package chart_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/cni-plugin/config"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/node/installcni"
)

func helmBin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(testenv.BinDir(), "helm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm not found at %s: run `make tools`", p)
	}
	return p
}

func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helmOutput(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// helmOutput runs helm and returns its stdout, or on failure its stdout and stderr.
func helmOutput(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String() + "\n" + errb.String(), err
	}
	return out.String(), nil
}

// objects splits a rendering into kind/name → raw YAML.
func objects(t *testing.T, rendered string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(rendered)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue
		}
		out[meta.Kind+"/"+meta.Metadata.Name] = doc
	}
	return out
}

func decode[T any](t *testing.T, objs map[string][]byte, key string) *T {
	t.Helper()
	raw, ok := objs[key]
	if !ok {
		var keys []string
		for k := range objs {
			keys = append(keys, k)
		}
		t.Fatalf("%s not rendered; got %v", key, keys)
	}
	v := new(T)
	if err := yaml.UnmarshalStrict(raw, v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

func TestLint(t *testing.T) {
	helm(t, "lint", ".")
	helm(t, "lint", ".", "-f", "ci/rr-tor-values.yaml")
}

func TestTemplateDefaults(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system"))
	ds := decode[appsv1.DaemonSet](t, objs, "DaemonSet/tabby-node")
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.PriorityClassName != "system-node-critical" {
		t.Errorf("hostNetwork %v priorityClassName %q", spec.HostNetwork, spec.PriorityClassName)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" {
		t.Errorf("tolerations %v: want one that tolerates every taint", spec.Tolerations)
	}
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru == nil || ru.MaxUnavailable.IntValue() != 1 {
		t.Errorf("update strategy %+v", ds.Spec.UpdateStrategy)
	}
	if len(spec.InitContainers) != 1 || strings.Join(spec.InitContainers[0].Command, " ") != "/usr/local/bin/tabby-node install-cni" {
		t.Fatalf("init containers %+v", spec.InitContainers)
	}
	c := spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--node-name=$(NODE_NAME)", "--namespace=$(POD_NAMESPACE)", "--health-addr=:9099", "--metrics-addr=:9091", "--run-dir=/var/run/tabby", "--log-level=info", "--gobgp-api=", "--mtu=0"} {
		if !strings.Contains(args, want) {
			t.Errorf("tabby-node args %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "--bgp-address") {
		t.Errorf("default args carry --bgp-address: %q", args)
	}
	if c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Port.String() != "health" {
		t.Errorf("probes %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	caps := map[corev1.Capability]bool{}
	for _, cp := range c.SecurityContext.Capabilities.Add {
		caps[cp] = true
	}
	for _, want := range []corev1.Capability{"NET_ADMIN", "NET_RAW", "SYS_ADMIN"} {
		if !caps[want] {
			t.Errorf("capability %s missing", want)
		}
	}
	var hostPaths []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	if got := strings.Join(hostPaths, " "); got != "/opt/cni/bin /etc/cni/net.d /var/run/tabby /lib/modules /run/xtables.lock" {
		t.Errorf("hostPath volumes: %s", got)
	}

	pool := decode[v1.IPPool](t, objs, "IPPool/default-ipv4-ippool")
	if pool.Spec.CIDR != "10.244.0.0/16" || pool.Spec.BlockSize != 26 || !pool.Spec.NATOutgoing || pool.Spec.IPIPMode != v1.IPIPModeNever || pool.Spec.VXLANMode != v1.VXLANModeNever {
		t.Errorf("pool %+v", pool.Spec)
	}
	if _, ok := objs["FelixConfiguration/default"]; ok {
		t.Errorf("default values render a FelixConfiguration: the agents' defaults need none")
	}
	if errs := validation.IPPool(pool); len(errs) > 0 {
		t.Errorf("pool invalid: %v", errs)
	}
	if _, ok := objs["IPPool/default-ipv6-ippool"]; ok {
		t.Errorf("default values render an IPv6 pool")
	}
	bgp := decode[v1.BGPConfiguration](t, objs, "BGPConfiguration/default")
	if *bgp.Spec.ASNumber != 64512 || !*bgp.Spec.NodeToNodeMeshEnabled || *bgp.Spec.ListenPort != 179 || bgp.Spec.MaxPaths != nil {
		t.Errorf("bgp %+v", bgp.Spec)
	}
	bgp = decode[v1.BGPConfiguration](t, objects(t, helm(t, "template", "tabby", ".", "--set", "bgp.maxPaths=2")), "BGPConfiguration/default")
	if bgp.Spec.MaxPaths == nil || *bgp.Spec.MaxPaths != 2 || len(validation.BGPConfiguration(bgp)) > 0 {
		t.Errorf("bgp.maxPaths=2: %+v", bgp.Spec)
	}
	for k := range objs {
		if strings.HasPrefix(k, "BGPPeer/") || strings.HasPrefix(k, "ServiceMonitor/") || strings.HasPrefix(k, "PrometheusRule/") || k == "ConfigMap/tabby-dashboards" {
			t.Errorf("default values render %s", k)
		}
	}

	cr := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/tabby-node")
	for _, r := range cr.Rules {
		for _, res := range r.Resources {
			if res == "secrets" {
				t.Errorf("ClusterRole grants secrets cluster-wide: %+v", r)
			}
		}
	}
	role := decode[rbacv1.Role](t, objs, "Role/tabby-secrets")
	if role.Namespace != "kube-system" || role.Rules[0].Resources[0] != "secrets" {
		t.Errorf("secrets role %+v", role)
	}

	// The conflist template renders, through install-cni, into a configuration the plugin parses.
	cm := decode[corev1.ConfigMap](t, objs, "ConfigMap/tabby-cni-config")
	tmpl := filepath.Join(t.TempDir(), "t")
	if err := os.WriteFile(tmpl, []byte(cm.Data["10-tabby.conflist.template"]), 0o644); err != nil {
		t.Fatal(err)
	}
	conf, err := installcni.Render(installcni.Options{NodeName: "node-a", MTU: 1400, ConfTemplate: tmpl, HostKubeconfigPath: "/etc/cni/net.d/tabby-kubeconfig"})
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Name       string            `json:"name"`
		CNIVersion string            `json:"cniVersion"`
		Plugins    []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(conf, &list); err != nil || list.Name != "k8s-pod-network" || list.CNIVersion != "1.0.0" || len(list.Plugins) != 3 {
		t.Fatalf("conflist %s: %v", conf, err)
	}
	var plugin map[string]any
	_ = json.Unmarshal(list.Plugins[0], &plugin)
	plugin["cniVersion"], plugin["name"] = list.CNIVersion, list.Name
	b, _ := json.Marshal(plugin)
	nc, err := config.Parse(b)
	if err != nil {
		t.Fatalf("the CNI plugin refuses the rendered configuration: %v\n%s", err, b)
	}
	if nc.NodeName != "node-a" || nc.MTU != 1400 || nc.Kubeconfig != "/etc/cni/net.d/tabby-kubeconfig" || nc.IPAMSocket != "/var/run/tabby/ipam.sock" || nc.IPAM.Type != "tabby-ipam" || nc.LogLevel != "warn" {
		t.Errorf("parsed plugin config %+v", nc)
	}

	ver := decode[corev1.ConfigMap](t, objs, "ConfigMap/tabby-version")
	if ver.Labels["tabby.dev/info"] != "version" || ver.Labels["app.kubernetes.io/name"] != "tabby" || ver.Data["version"] != "0.1.0" {
		t.Errorf("version ConfigMap %+v", ver)
	}
}

// An IPv6-only cluster: the IPv6 pool alone, valid as the API server's rules see it.
// The certificate the chart makes for tabby-typha loads as tabby-typha loads it, is ECDSA (every
// watch is a connection, and a handshake with RSA 2048 costs three times as much), and verifies
// against the ca.crt the agents mount, for the name they ask for.
func TestTemplateTyphaCertificate(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system"))
	sec := decode[corev1.Secret](t, objs, "Secret/tabby-typha-tls")
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		t.Fatalf("tls.crt and tls.key: %v", err)
	}
	if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Errorf("the serving key is %T, want ECDSA", pair.PrivateKey)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		t.Fatal("ca.crt holds no certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "tabby-typha", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate against ca.crt: %v", err)
	}
}

func TestTemplateIPv6Pool(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system", "--set", "ipPool.create=false", "--set", "ipv6Pool.create=true"))
	if _, ok := objs["IPPool/default-ipv4-ippool"]; ok {
		t.Errorf("ipPool.create=false renders the IPv4 pool")
	}
	pool := decode[v1.IPPool](t, objs, "IPPool/default-ipv6-ippool")
	if pool.Spec.CIDR != "fd00:10:244::/48" || pool.Spec.BlockSize != 122 || !pool.Spec.NATOutgoing || pool.Spec.IPIPMode != "" {
		t.Errorf("IPv6 pool %+v", pool.Spec)
	}
	if errs := validation.IPPool(pool); len(errs) > 0 {
		t.Errorf("IPv6 pool invalid: %v", errs)
	}
}

// bgp.enabled=false: tabby-node runs with --bgp=none, declares no BGP port and gets no GoBGP API
// flag; the default keeps BGP on.
func TestTemplateNoBGP(t *testing.T) {
	argsOf := func(objs map[string][]byte) (string, []corev1.ContainerPort) {
		ds := decode[appsv1.DaemonSet](t, objs, "DaemonSet/tabby-node")
		c := ds.Spec.Template.Spec.Containers[0]
		return strings.Join(c.Args, " "), c.Ports
	}
	args, ports := argsOf(objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system")))
	if strings.Contains(args, "--bgp=") || ports[0].Name != "bgp" {
		t.Errorf("default values: args %q ports %v, want BGP on", args, ports)
	}
	args, ports = argsOf(objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system", "--set", "bgp.enabled=false")))
	if !strings.Contains(args, "--bgp=none") || strings.Contains(args, "--gobgp-api") {
		t.Errorf("bgp.enabled=false: args %q", args)
	}
	for _, p := range ports {
		if p.Name == "bgp" {
			t.Errorf("bgp.enabled=false declares port %+v", p)
		}
	}
}

// VXLAN from values: the pools' vxlanMode, valid as the API server's rules see them; the
// FelixConfiguration, rendered with the fields set and valid; a pool with both encapsulations
// refused by helm itself, naming the values.
func TestTemplateVXLAN(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system", "--set", "bgp.enabled=false",
		"--set", "ipPool.vxlanMode=Always", "--set", "ipv6Pool.create=true", "--set", "ipv6Pool.vxlanMode=CrossSubnet",
		"--set", "felixConfiguration.vxlanVNI=4097", "--set", "felixConfiguration.vxlanPort=8472", "--set", "felixConfiguration.vxlanMTU=1400", "--set", "felixConfiguration.vxlanMTUV6=1380"))
	for name, mode := range map[string]v1.VXLANMode{"IPPool/default-ipv4-ippool": v1.VXLANModeAlways, "IPPool/default-ipv6-ippool": v1.VXLANModeCrossSubnet} {
		pool := decode[v1.IPPool](t, objs, name)
		if pool.Spec.VXLANMode != mode {
			t.Errorf("%s: vxlanMode %q, want %s", name, pool.Spec.VXLANMode, mode)
		}
		if errs := validation.IPPool(pool); len(errs) > 0 {
			t.Errorf("%s invalid: %v", name, errs)
		}
	}
	fc := decode[v1.FelixConfiguration](t, objs, "FelixConfiguration/default")
	if s := fc.Spec; s.VXLANVNI == nil || *s.VXLANVNI != 4097 || *s.VXLANPort != 8472 || *s.VXLANMTU != 1400 || *s.VXLANMTUV6 != 1380 {
		t.Errorf("FelixConfiguration %+v", fc.Spec)
	}
	if errs := validation.FelixConfiguration(fc); len(errs) > 0 {
		t.Errorf("FelixConfiguration invalid: %v", errs)
	}
	// One field set renders the object with that field alone: the rest keep the agents' defaults.
	fc = decode[v1.FelixConfiguration](t, objects(t, helm(t, "template", "tabby", ".", "--set", "felixConfiguration.vxlanPort=8472")), "FelixConfiguration/default")
	if fc.Spec.VXLANVNI != nil || fc.Spec.VXLANMTU != nil || *fc.Spec.VXLANPort != 8472 {
		t.Errorf("FelixConfiguration with the port alone: %+v", fc.Spec)
	}

	out, err := helmOutput(t, "template", "tabby", ".", "--set", "ipPool.ipipMode=CrossSubnet", "--set", "ipPool.vxlanMode=Always")
	if err == nil || !strings.Contains(out, "ipPool: ipipMode and vxlanMode cannot both be on") {
		t.Errorf("ipipMode and vxlanMode both on: %v\n%s", err, out)
	}
}

func TestTemplateFlowLogs(t *testing.T) {
	fc := decode[v1.FelixConfiguration](t, objects(t, helm(t, "template", "tabby", ".",
		"--set", "flowLogs.enabled=true", "--set", "flowLogs.flushInterval=10s", "--set", "flowLogs.maxRecords=5000")), "FelixConfiguration/default")
	fl := fc.Spec.FlowLogs
	if fl == nil || !fl.Enabled || fl.FlushInterval == nil || fl.FlushInterval.Duration != 10*time.Second || fl.MaxRecords == nil || *fl.MaxRecords != 5000 || fc.Spec.VXLANVNI != nil {
		t.Errorf("FelixConfiguration %+v flowLogs %+v", fc.Spec, fl)
	}
	if errs := validation.FelixConfiguration(fc); len(errs) > 0 {
		t.Errorf("FelixConfiguration invalid: %v", errs)
	}
	if strings.Contains(helm(t, "template", "tabby", "."), "flowLogs") {
		t.Error("flowLogs rendered by default")
	}
}

// Every kind tabby-typha serves (client.FannedOut) may be listed and watched by tabby-node (its
// informers go through tabby-typha or, while no replica answers, to the API server) and by
// tabby-typha (its feeds): a kind added to the fan-out and not to the chart's RBAC fails here.
func TestTemplateRBACCoversTheFannedOutKinds(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system"))
	for _, role := range []string{"ClusterRole/tabby-node", "ClusterRole/tabby-typha"} {
		granted := map[string]bool{}
		for _, r := range decode[rbacv1.ClusterRole](t, objs, role).Rules {
			if slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch") {
				for _, res := range r.Resources {
					granted[res] = true
				}
			}
		}
		for res := range client.FannedOut {
			if !granted[res] {
				t.Errorf("%s does not let list and watch %s", role, res)
			}
		}
	}
}

func TestTemplateRouteReflectorsAndToR(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system", "-f", "ci/rr-tor-values.yaml"))
	bgp := decode[v1.BGPConfiguration](t, objs, "BGPConfiguration/default")
	if *bgp.Spec.NodeToNodeMeshEnabled {
		t.Errorf("mesh still on")
	}
	if b := bgp.Spec.BFD; b == nil || !b.Enabled {
		t.Errorf("BGPConfiguration bfd %+v, want enabled", b)
	}
	mult := int32(3)
	torBFD := &v1.BFD{Enabled: true, MinRx: &metav1.Duration{Duration: 300 * time.Millisecond}, MinTx: &metav1.Duration{Duration: 300 * time.Millisecond}, Multiplier: &mult}
	want := map[string]v1.BGPPeerSpec{
		"peer-with-route-reflectors": {NodeSelector: "!has(route-reflector)", PeerSelector: "has(route-reflector)"},
		"route-reflector-mesh":       {NodeSelector: "has(route-reflector)", PeerSelector: "has(route-reflector)"},
		"tor-rack1":                  {NodeSelector: "rack == 'rack1'", PeerIP: "198.51.100.1", ASNumber: 65001, Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "bgp-passwords", Key: "tor-rack1"}}, BFD: torBFD},
		"tor-rack2":                  {NodeSelector: "rack == 'rack2'", PeerIP: "203.0.113.1", ASNumber: 65002, KeepOriginalNextHop: true},
	}
	n := 0
	for k := range objs {
		if strings.HasPrefix(k, "BGPPeer/") {
			n++
		}
	}
	if n != len(want) {
		t.Errorf("rendered %d BGPPeers, want %d", n, len(want))
	}
	for name, spec := range want {
		p := decode[v1.BGPPeer](t, objs, "BGPPeer/"+name)
		got, _ := json.Marshal(p.Spec)
		exp, _ := json.Marshal(spec)
		if string(got) != string(exp) {
			t.Errorf("BGPPeer %s: %s, want %s", name, got, exp)
		}
		if errs := validation.BGPPeer(p); len(errs) > 0 {
			t.Errorf("BGPPeer %s invalid: %v", name, errs)
		}
	}
	pool := decode[v1.IPPool](t, objs, "IPPool/default-ipv4-ippool")
	if pool.Spec.IPIPMode != v1.IPIPModeCrossSubnet || pool.Spec.BlockSize != 24 {
		t.Errorf("pool %+v", pool.Spec)
	}
	ds := decode[appsv1.DaemonSet](t, objs, "DaemonSet/tabby-node")
	args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--bgp-address=cidr=198.51.100.0/24") || !strings.Contains(args, "--bgp-address6=cidr=2001:db8:100::/64") || !strings.Contains(args, "--mtu=1400") {
		t.Errorf("args %q", args)
	}
	if !strings.Contains(strings.Join(ds.Spec.Template.Spec.InitContainers[0].Args, " "), "--mtu=1400") {
		t.Errorf("install-cni args %v", ds.Spec.Template.Spec.InitContainers[0].Args)
	}
}

func TestInstallUpgradeUninstall(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	// The chart installs the CRDs itself (crds/).
	env := testenv.Start(t, testenv.Options{SkipCRDs: true})
	ctx := context.Background()
	kc := "--kubeconfig=" + env.Kubeconfig
	helm(t, "install", "tabby", ".", kc, "--namespace", "tabby-system", "--create-namespace", "-f", "ci/rr-tor-values.yaml")

	ds, err := env.Kube.AppsV1().DaemonSets("tabby-system").Get(ctx, "tabby-node", metav1.GetOptions{})
	if err != nil || !ds.Spec.Template.Spec.HostNetwork {
		t.Fatalf("DaemonSet: %v %v", ds, err)
	}
	pool, err := env.Client.IPPools().Get(ctx, "default-ipv4-ippool")
	if err != nil || pool.Spec.CIDR != "10.244.0.0/16" {
		t.Fatalf("pool: %v %v", pool, err)
	}
	peers, err := env.Client.BGPPeers().List(ctx, metav1.ListOptions{})
	if err != nil || len(peers.Items) != 4 {
		t.Fatalf("peers: %v %v", peers, err)
	}
	cms, err := env.Kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tabby,tabby.dev/info=version"})
	if err != nil || len(cms.Items) != 1 || cms.Items[0].Data["version"] != "0.1.0" {
		t.Fatalf("version ConfigMap: %v %v", cms, err)
	}
	if _, err := env.Kube.RbacV1().Roles("tabby-system").Get(ctx, "tabby-secrets", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	helm(t, "upgrade", "tabby", ".", kc, "--namespace", "tabby-system", "-f", "ci/rr-tor-values.yaml", "--set", "bgp.asNumber=64600", "--set", "image.tag=v0.2.0",
		"--set", "felixConfiguration.vxlanVNI=4097")
	cfg, err := env.Client.BGPConfigurations().Get(ctx, "default")
	if err != nil || *cfg.Spec.ASNumber != 64600 {
		t.Fatalf("after upgrade: %+v %v", cfg, err)
	}
	// The FelixConfiguration's CRD came with the chart (crds/), and the API server took the object.
	if fc, err := env.Client.FelixConfigurations().Get(ctx, "default"); err != nil || *fc.Spec.VXLANVNI != 4097 {
		t.Fatalf("FelixConfiguration after upgrade: %+v %v", fc, err)
	}
	ds, _ = env.Kube.AppsV1().DaemonSets("tabby-system").Get(ctx, "tabby-node", metav1.GetOptions{})
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/tabbynet/tabby:v0.2.0" {
		t.Errorf("image after upgrade: %s", img)
	}

	helm(t, "uninstall", "tabby", kc, "--namespace", "tabby-system", "--wait")
	if _, err := env.Client.IPPools().Get(ctx, "default-ipv4-ippool"); err == nil {
		t.Errorf("pool survives uninstall")
	}
	if _, err := env.Kube.AppsV1().DaemonSets("tabby-system").Get(ctx, "tabby-node", metav1.GetOptions{}); err == nil {
		t.Errorf("DaemonSet survives uninstall")
	}
}

// loadBalancer.pools renders valid LoadBalancer pools; tabby-node runs LoadBalancer IPAM and may
// do what it does (Services, their status, events, its Lease), and ipam: false turns it off.
func TestTemplateLoadBalancer(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system",
		"--set", "loadBalancer.pools[0].name=lb-ipv4,loadBalancer.pools[0].cidr=198.51.100.240/28",
		"--set", "loadBalancer.pools[1].name=lb-ipv6,loadBalancer.pools[1].cidr=2001:db8:100::/120,loadBalancer.pools[1].assignmentMode=Manual"))
	for _, name := range []string{"lb-ipv4", "lb-ipv6"} {
		pool := decode[v1.IPPool](t, objs, "IPPool/"+name)
		if errs := validation.IPPool(pool); len(errs) > 0 {
			t.Errorf("%s invalid: %v", name, errs)
		}
		p, errs := validation.ParseIPPool(pool)
		if len(errs) > 0 || !p.LoadBalancer() {
			t.Errorf("%s is not a LoadBalancer pool: %+v %v", name, p, errs)
		}
	}
	if m := decode[v1.IPPool](t, objs, "IPPool/lb-ipv6").Spec.AssignmentMode; m != v1.AssignmentModeManual {
		t.Errorf("lb-ipv6 assignmentMode %q", m)
	}
	args := strings.Join(decode[appsv1.DaemonSet](t, objs, "DaemonSet/tabby-node").Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--lb-ipam=true") {
		t.Errorf("tabby-node args %q lack --lb-ipam=true", args)
	}
	grants := func(rules []rbacv1.PolicyRule, group, res, verb string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, verb)
		})
	}
	cluster := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/tabby-node").Rules
	ns := decode[rbacv1.Role](t, objs, "Role/tabby-secrets").Rules
	for _, want := range []struct {
		rules            []rbacv1.PolicyRule
		group, res, verb string
	}{
		{cluster, "", "services", "watch"}, {cluster, "", "services/status", "update"}, {cluster, "", "events", "create"},
		{ns, "coordination.k8s.io", "leases", "get"}, {ns, "coordination.k8s.io", "leases", "create"}, {ns, "coordination.k8s.io", "leases", "update"},
	} {
		if !grants(want.rules, want.group, want.res, want.verb) {
			t.Errorf("tabby-node may not %s %s (group %q)", want.verb, want.res, want.group)
		}
	}
	off := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system", "--set", "loadBalancer.ipam=false"))
	if args := strings.Join(decode[appsv1.DaemonSet](t, off, "DaemonSet/tabby-node").Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--lb-ipam=false") {
		t.Errorf("loadBalancer.ipam=false: args %q", args)
	}
}

// The admin network policies' status writer: on by default, its status subresources and Lease
// granted, off with adminNetworkPolicy.status=false.
func TestTemplatePolicyStatus(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system"))
	args := strings.Join(decode[appsv1.DaemonSet](t, objs, "DaemonSet/tabby-node").Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--policy-status=true") {
		t.Errorf("tabby-node args %q lack --policy-status=true", args)
	}
	grants := func(rules []rbacv1.PolicyRule, group, res, verb string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, verb)
		})
	}
	cluster := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/tabby-node").Rules
	for _, res := range []string{"adminnetworkpolicies/status", "baselineadminnetworkpolicies/status", "clusternetworkpolicies/status"} {
		if !grants(cluster, "policy.networking.k8s.io", res, "update") {
			t.Errorf("tabby-node may not update %s", res)
		}
	}
	if ns := decode[rbacv1.Role](t, objs, "Role/tabby-secrets").Rules; !grants(ns, "coordination.k8s.io", "leases", "update") {
		t.Errorf("tabby-node may not update its Leases")
	}
	off := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system", "--set", "adminNetworkPolicy.status=false"))
	if args := strings.Join(decode[appsv1.DaemonSet](t, off, "DaemonSet/tabby-node").Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--policy-status=false") {
		t.Errorf("adminNetworkPolicy.status=false: args %q", args)
	}
}
