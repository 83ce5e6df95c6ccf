// Package installcni is tabby-node's `install-cni` step, run by the DaemonSet's init container:
// it copies the tabby and tabby-ipam plugins onto the host, writes the CNI network configuration
// rendered from the chart's template, and a kubeconfig the plugins use to reach the API server
// with the pod's service account. Every file is written to a temporary name in its final
// directory and renamed into place, so the container runtime never reads a half-written plugin
// or configuration.
package installcni

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	flag "github.com/spf13/pflag"
)

// Options of the install step. Paths with /host are the host's directories as mounted into the
// container.
type Options struct {
	// NodeName goes into the configuration's "nodename" (__NODENAME__).
	NodeName string
	// MTU for pod interfaces (__CNI_MTU__); 0 lets the plugin derive it from the uplink.
	MTU int
	// SrcBinDir holds the plugin binaries in the image.
	SrcBinDir string
	// Plugins are the binaries copied from SrcBinDir.
	Plugins []string
	// HostBinDir is the host's /opt/cni/bin.
	HostBinDir string
	// HostNetDir is the host's /etc/cni/net.d.
	HostNetDir string
	// ConfName is the conflist's file name in HostNetDir.
	ConfName string
	// ConfTemplate is the conflist template file (the chart's ConfigMap).
	ConfTemplate string
	// KubeconfigName is the kubeconfig's file name in HostNetDir.
	KubeconfigName string
	// HostKubeconfigPath is where the plugins, running on the host, find the kubeconfig
	// (__KUBECONFIG_FILEPATH__): HostNetDir as the host sees it.
	HostKubeconfigPath string
	// ServiceAccountDir holds token and ca.crt of the pod's service account.
	ServiceAccountDir string
	// APIServer is https://host:port; default from KUBERNETES_SERVICE_HOST/PORT.
	APIServer string
	// RequestToken, when set, turns the pod's token into the token the kubeconfig holds
	// (RequestToken: one not bound to the pod); nil writes the pod's own token.
	RequestToken func(ctx context.Context, apiServer string, podToken, ca []byte) (string, error)
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// Defaults are the paths the Helm chart mounts.
func Defaults() Options {
	return Options{
		NodeName:           os.Getenv("NODE_NAME"),
		SrcBinDir:          "/opt/tabby/cni-bin",
		Plugins:            []string{"tabby", "tabby-ipam"},
		HostBinDir:         "/host/opt/cni/bin",
		HostNetDir:         "/host/etc/cni/net.d",
		ConfName:           "10-tabby.conflist",
		ConfTemplate:       "/etc/tabby/cni/10-tabby.conflist.template",
		KubeconfigName:     "tabby-kubeconfig",
		HostKubeconfigPath: "/etc/cni/net.d/tabby-kubeconfig",
		ServiceAccountDir:  "/var/run/secrets/kubernetes.io/serviceaccount",
		RequestToken:       RequestToken,
	}
}

// RegisterFlags binds the options to fs (the `tabby-node install-cni` flags); o's current
// values are the defaults.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "this node's name (default $NODE_NAME)")
	fs.IntVar(&o.MTU, "mtu", o.MTU, "pod interface MTU written into the CNI configuration (0: derived by the plugin)")
	fs.StringVar(&o.SrcBinDir, "src-bin-dir", o.SrcBinDir, "directory of the plugin binaries in the image")
	fs.StringVar(&o.HostBinDir, "cni-bin-dir", o.HostBinDir, "the host's CNI binary directory, as mounted")
	fs.StringVar(&o.HostNetDir, "cni-net-dir", o.HostNetDir, "the host's CNI configuration directory, as mounted")
	fs.StringVar(&o.ConfName, "conf-name", o.ConfName, "file name of the conflist")
	fs.StringVar(&o.ConfTemplate, "conf-template", o.ConfTemplate, "conflist template (placeholders __NODENAME__, __CNI_MTU__, __KUBECONFIG_FILEPATH__)")
	fs.StringVar(&o.KubeconfigName, "kubeconfig-name", o.KubeconfigName, "file name of the plugins' kubeconfig")
	fs.StringVar(&o.HostKubeconfigPath, "host-kubeconfig-path", o.HostKubeconfigPath, "the kubeconfig's path as the host sees it")
	fs.StringVar(&o.ServiceAccountDir, "service-account-dir", o.ServiceAccountDir, "directory with the service account's token and ca.crt")
	fs.StringVar(&o.APIServer, "api-server", o.APIServer, "API server URL (default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)")
}

// Main parses args as install-cni flags and runs the step: what `tabby-node install-cni` calls.
func Main(ctx context.Context, args []string) error {
	o := Defaults()
	fs := flag.NewFlagSet("install-cni", flag.ContinueOnError)
	o.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("install-cni: unexpected arguments %q", fs.Args())
	}
	return Run(ctx, o)
}

func (o *Options) check() error {
	if o.NodeName == "" {
		return errors.New("node name is empty: set --node-name or $NODE_NAME")
	}
	if o.MTU != 0 && (o.MTU < 576 || o.MTU > 65535) {
		return fmt.Errorf("mtu %d out of range [576, 65535] (0 = derived)", o.MTU)
	}
	if o.APIServer == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return errors.New("api server unknown: set --api-server or run in a pod ($KUBERNETES_SERVICE_HOST/PORT)")
		}
		o.APIServer = "https://" + net.JoinHostPort(host, port)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Run installs the plugins, the kubeconfig, then the configuration: the configuration goes last
// because its presence is what tells the kubelet the node's network is ready, and by then
// everything it refers to must be in place. Nothing is left behind on failure but files that
// were complete before (temporaries are removed).
func Run(ctx context.Context, o Options) error {
	if err := o.check(); err != nil {
		return fmt.Errorf("install-cni: %w", err)
	}
	// Render first: a broken template must fail before anything on the host changes.
	conf, err := Render(o)
	if err != nil {
		return fmt.Errorf("install-cni: %w", err)
	}
	for _, p := range o.Plugins {
		if err := ctx.Err(); err != nil {
			return err
		}
		src := filepath.Join(o.SrcBinDir, p)
		if err := copyAtomic(src, filepath.Join(o.HostBinDir, p), 0o755); err != nil {
			return fmt.Errorf("install-cni: install plugin %s: %w", p, err)
		}
		o.Logger.Info("installed CNI plugin", "plugin", p, "dir", o.HostBinDir)
	}
	if err := WriteKubeconfig(ctx, o); err != nil {
		return fmt.Errorf("install-cni: %w", err)
	}
	confPath := filepath.Join(o.HostNetDir, o.ConfName)
	if err := writeAtomic(confPath, conf, 0o644); err != nil {
		return fmt.Errorf("install-cni: write %s: %w", confPath, err)
	}
	o.Logger.Info("wrote CNI configuration", "path", confPath, "node", o.NodeName, "mtu", o.MTU)
	return nil
}

// Render fills the template's placeholders and checks the result is a valid conflist.
func Render(o Options) ([]byte, error) {
	tmpl, err := os.ReadFile(o.ConfTemplate)
	if err != nil {
		return nil, fmt.Errorf("read conflist template: %w", err)
	}
	nodeName, _ := json.Marshal(o.NodeName)
	kc, _ := json.Marshal(o.HostKubeconfigPath)
	out := strings.NewReplacer(
		// The placeholders sit inside JSON strings in the template; the values are escaped.
		`"__NODENAME__"`, string(nodeName),
		`"__KUBECONFIG_FILEPATH__"`, string(kc),
		"__CNI_MTU__", strconv.Itoa(o.MTU),
	).Replace(string(tmpl))
	list, err := libcni.ConfListFromBytes([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("conflist template %s renders an invalid conflist: %w", o.ConfTemplate, err)
	}
	if len(list.Plugins) == 0 {
		return nil, fmt.Errorf("conflist template %s has no plugins", o.ConfTemplate)
	}
	return []byte(out), nil
}

// WriteKubeconfig writes the plugins' kubeconfig (mode 0600: it holds a credential) with a token
// of the service account: one requested for the plugins (o.RequestToken), or, when that fails,
// the pod's current token, which works until the pod is deleted. Tokens expire, so tabby-node
// calls this again periodically (KeepKubeconfigFresh) after the init container wrote the first.
func WriteKubeconfig(ctx context.Context, o Options) error {
	if err := o.check(); err != nil {
		return err
	}
	token, err := os.ReadFile(filepath.Join(o.ServiceAccountDir, "token"))
	if err != nil {
		return fmt.Errorf("read service account token: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(o.ServiceAccountDir, "ca.crt"))
	if err != nil {
		return fmt.Errorf("read service account CA: %w", err)
	}
	if o.RequestToken != nil {
		own, err := o.RequestToken(ctx, o.APIServer, token, ca)
		if err != nil {
			o.Logger.Warn("the CNI plugins' kubeconfig holds the pod's own token, which stops working when this pod is deleted "+
				"(a rolling upgrade): grant create on serviceaccounts/token for the service account, as the chart does",
				"err", err)
		} else {
			token = []byte(own)
		}
	}
	cfg := map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"clusters": []any{map[string]any{"name": "local", "cluster": map[string]any{
			"server":                     o.APIServer,
			"certificate-authority-data": base64.StdEncoding.EncodeToString(ca),
		}}},
		"users":           []any{map[string]any{"name": "tabby-cni", "user": map[string]any{"token": strings.TrimSpace(string(token))}}},
		"contexts":        []any{map[string]any{"name": "tabby", "context": map[string]any{"cluster": "local", "user": "tabby-cni"}}},
		"current-context": "tabby",
	}
	// JSON is YAML: client-go's kubeconfig loader reads it.
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(o.HostNetDir, o.KubeconfigName)
	if err := writeAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// KeepKubeconfigFresh rewrites the kubeconfig every interval until ctx ends; errors are
// returned only when ctx is still live, so the caller decides whether a failure is fatal.
func KeepKubeconfigFresh(ctx context.Context, o Options, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := WriteKubeconfig(ctx, o); err != nil {
				return fmt.Errorf("refresh CNI kubeconfig: %w", err)
			}
		}
	}
}

func copyAtomic(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomicFrom(dst, in, mode)
}

func writeAtomic(dst string, data []byte, mode os.FileMode) error {
	return writeAtomicFrom(dst, strings.NewReader(string(data)), mode)
}

// writeAtomicFrom writes a temporary file next to dst, syncs it and renames it over dst. A rename
// over a binary being executed is safe (the running process keeps the old inode), whereas
// writing into it in place fails with ETXTBSY or corrupts it.
func writeAtomicFrom(dst string, r io.Reader, mode os.FileMode) (err error) {
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, r); err != nil {
		return err
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
