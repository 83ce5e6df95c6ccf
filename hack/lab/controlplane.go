package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
)

// Namespace is where tabby-node runs (BGP password Secrets live here).
const Namespace = "tabby-system"

// DefaultPoolName is the pool the chart (or the fallback) creates.
const DefaultPoolName = "default-ipv4-ippool"

// DefaultPool6Name is the IPv6 pool of a dual-stack or IPv6-only lab.
const DefaultPool6Name = "default-ipv6-ippool"

func (l *Lab) startControlPlane(ctx context.Context) error {
	if ext := l.Opts.External; ext != nil {
		env, err := testenv.Connect(l.Dir, ext.URL, ext.Token)
		if err != nil {
			return err
		}
		l.Config, l.Client, l.Kube, l.Kubecfg, l.token = env.Config, env.Client, env.Kube, env.Kubeconfig, ext.Token
		if l.apiAddr, err = apiTarget(ext.URL); err != nil {
			return err
		}
		l.Chart = "external control plane: objects installed by its owner"
		return nil
	}
	start := time.Now()
	cpDir := filepath.Join(l.Dir, "controlplane")
	if err := os.MkdirAll(cpDir, 0o700); err != nil {
		return err
	}
	o := testenv.Options{Dir: cpDir, SkipCRDs: true, Cluster: l.Opts.KubeletNodes, EtcdRelay: l.Opts.EtcdRelay,
		DualStackServices: l.Opts.Families.IPv6()}
	if l.Opts.HostLink {
		o.BindAddress = HostAddr.Addr().String()
	}
	env, err := testenv.StartProcess(ctx, o)
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	l.onClose(func(context.Context) error { env.Stop(); return nil })
	l.Env, l.Config, l.Client, l.Kube, l.Kubecfg = env, env.Config, env.Client, env.Kube, env.Kubeconfig
	l.token = env.Config.BearerToken
	if l.apiAddr, err = apiTarget(env.URL); err != nil {
		return err
	}
	l.log.Debug("control plane up", "url", env.URL, "took", time.Since(start).Round(time.Millisecond))
	if _, err := l.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", Namespace, err)
	}
	if l.Opts.KubeletNodes {
		l.Chart = "left to helm install"
		return nil
	}
	return l.installClusterObjects(ctx)
}

// chartOutput is what the lab takes from `helm template`.
type chartOutput struct {
	CRDs     []apiextv1.CustomResourceDefinition
	Pools    []v1.IPPool
	Configs  []v1.BGPConfiguration
	Peers    []v1.BGPPeer
	Conflist string // the CNI network config template of the chart's ConfigMap, "" if none
}

// installClusterObjects applies the CRDs and the default objects the Helm chart renders, or
// falls back to apis/crds and built-in defaults when the chart cannot be rendered.
func (l *Lab) installClusterObjects(ctx context.Context) error {
	out, why := l.renderChart(ctx)
	if out == nil {
		l.Chart = "apis/crds fallback (" + why + ")"
		l.log.Warn("installing CRDs from apis/crds, not the chart", "why", why)
		if err := testenv.InstallCRDs(ctx, l.Config); err != nil {
			return err
		}
		out = &chartOutput{}
	} else {
		l.Chart = "charts/tabby"
		if err := testenv.ApplyCRDs(ctx, l.Config, out.CRDs); err != nil {
			return err
		}
	}
	l.chart = out
	if len(out.Pools) == 0 {
		l.Chart += "; default IPPool made by the lab (the chart renders none)"
		if l.Opts.Families.IPv4Pods() {
			out.Pools = append(out.Pools, v1.IPPool{
				ObjectMeta: metav1.ObjectMeta{Name: DefaultPoolName},
				Spec:       v1.IPPoolSpec{CIDR: PodCIDR.String(), BlockSize: v1.DefaultBlockSizeIPv4, IPIPMode: v1.IPIPModeNever, VXLANMode: l.Opts.VXLAN, NATOutgoing: true},
			})
		}
		if l.Opts.Families.IPv6() {
			out.Pools = append(out.Pools, v1.IPPool{
				ObjectMeta: metav1.ObjectMeta{Name: DefaultPool6Name},
				Spec:       v1.IPPoolSpec{CIDR: PodCIDR6.String(), BlockSize: v1.DefaultBlockSizeIPv6, VXLANMode: l.Opts.VXLAN, NATOutgoing: true},
			})
		}
	}
	for i := range out.Pools {
		if _, err := l.Client.IPPools().Create(ctx, &out.Pools[i]); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create IPPool %s: %w", out.Pools[i].Name, err)
		}
	}
	for i := range out.Configs {
		if _, err := l.Client.BGPConfigurations().Create(ctx, &out.Configs[i]); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create BGPConfiguration %s: %w", out.Configs[i].Name, err)
		}
	}
	for i := range out.Peers {
		if _, err := l.Client.BGPPeers().Create(ctx, &out.Peers[i]); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create BGPPeer %s: %w", out.Peers[i].Name, err)
		}
	}
	return nil
}

// renderChart runs `helm template` on charts/tabby. It returns nil and the reason when the
// chart or helm is not there.
func (l *Lab) renderChart(ctx context.Context) (*chartOutput, string) {
	repo, err := l.repoDir()
	if err != nil {
		return nil, err.Error()
	}
	chart := filepath.Join(repo, "charts", "tabby")
	if _, err := os.Stat(filepath.Join(chart, "Chart.yaml")); err != nil {
		return nil, "charts/tabby/Chart.yaml missing"
	}
	helm := filepath.Join(testenv.BinDir(), "helm")
	if _, err := os.Stat(helm); err != nil {
		return nil, helm + " missing: run `make tools`"
	}
	args := []string{"template", "tabby", chart, "--namespace", Namespace, "--include-crds"}
	for _, s := range append(l.Opts.helmSet(), l.Opts.HelmSet...) {
		args = append(args, "--set", s)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Sprintf("helm template failed: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	out, err := parseChart(stdout.Bytes())
	if err != nil {
		return nil, "parse helm template output: " + err.Error()
	}
	if len(out.CRDs) == 0 {
		return nil, "the chart renders no CRDs"
	}
	return out, ""
}

func parseChart(raw []byte) (*chartOutput, error) {
	out := &chartOutput{}
	for _, doc := range splitYAML(raw) {
		var meta struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		var err error
		switch meta.Kind {
		case "CustomResourceDefinition":
			var o apiextv1.CustomResourceDefinition
			err = yaml.UnmarshalStrict(doc, &o)
			out.CRDs = append(out.CRDs, o)
		case "IPPool":
			var o v1.IPPool
			err = yaml.UnmarshalStrict(doc, &o)
			out.Pools = append(out.Pools, o)
		case "BGPConfiguration":
			var o v1.BGPConfiguration
			err = yaml.UnmarshalStrict(doc, &o)
			out.Configs = append(out.Configs, o)
		case "BGPPeer":
			var o v1.BGPPeer
			err = yaml.UnmarshalStrict(doc, &o)
			out.Peers = append(out.Peers, o)
		case "ConfigMap":
			for k, v := range meta.Data {
				if strings.Contains(k, ".conflist") || strings.Contains(k, "cni_network_config") || strings.Contains(k, "cni-network-config") {
					out.Conflist = v
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", meta.Kind, err)
		}
	}
	return out, nil
}

func splitYAML(raw []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	flush := func() {
		if strings.TrimSpace(stripComments(cur.String())) != "" {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "---") {
			flush()
			continue
		}
		cur.WriteString(line + "\n")
	}
	flush()
	return docs
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// repoDir finds the tabby checkout: Options.RepoDir, else the nearest parent of the working
// directory whose go.mod declares the tabby module.
func (l *Lab) repoDir() (string, error) {
	if l.Opts.RepoDir != "" {
		return l.Opts.RepoDir, nil
	}
	return FindRepo()
}

// FindRepo finds the tabby checkout from the working directory upwards.
func FindRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			first, _ := bufio.NewReader(io.LimitReader(f, 200)).ReadString('\n')
			f.Close()
			if strings.TrimSpace(first) == "module github.com/tabbynet/tabby" {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the tabby checkout: set lab.Options.RepoDir")
		}
		dir = parent
	}
}
