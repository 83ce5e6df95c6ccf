// Package testenv runs a real etcd and kube-apiserver for tests and the lab: started on free
// ports in a few seconds, tabby's CRDs installed, torn down (processes killed, data removed) when
// the test ends, also when it fails. The binaries come from hack/controlplane/build.sh, which
// builds them once from the Go module proxy and caches them under $TABBY_CACHE (default
// ~/.cache/tabby).
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/crds"
	"github.com/tabbynet/tabby/internal/netnsfwd"
	"github.com/tabbynet/tabby/internal/proc"
)

// Options tune a control plane.
type Options struct {
	// BindAddress is where etcd and kube-apiserver listen (default 127.0.0.1). The lab binds an
	// underlay address so node namespaces reach the API server.
	BindAddress string
	// Dir holds data, certs and logs; a temporary directory when empty (removed on Stop).
	Dir string
	// SkipCRDs leaves the CRDs out (the lab installs them from the Helm chart).
	SkipCRDs bool
	// Cluster configures the API server for real nodes: the ServiceAccount admission plugin on
	// (a controller-manager creates the accounts) and the `kubernetes` Service's endpoints
	// kept at BindAddress.
	Cluster bool
	// DualStackServices gives Services an IPv6 range too (ServiceCIDRv6), so that IPv6 and
	// dual-stack Services can be created.
	DualStackServices bool
	// EtcdRelay makes kube-apiserver reach etcd through a relay in this process, whose
	// latency SetEtcdLatency sets: a slow etcd without touching any link.
	EtcdRelay bool
}

// ServiceCIDR is the range of Service ClusterIPs; the `kubernetes` Service is its first address.
const ServiceCIDR = "10.96.0.0/20"

// ServiceCIDRv6 is the IPv6 range of Service ClusterIPs with DualStackServices: a corner of the
// pod range that no test gives to pods.
const ServiceCIDRv6 = "fd00:10:244:ffff::/112"

// Env is a running control plane.
type Env struct {
	Config     *rest.Config
	Kubeconfig string // path of an admin kubeconfig
	Client     *client.Client
	Kube       kubernetes.Interface
	Dir        string
	URL        string
	// SAKey signs and verifies service account tokens (a controller-manager needs it).
	SAKey string
	// ServingCert is the API server's self-signed serving certificate: the cluster's root CA.
	ServingCert string

	procs    []*proc.Proc        // etcd, kube-apiserver
	etcd     *netnsfwd.Forwarder // the relay in front of etcd (Options.EtcdRelay)
	etcdArgs []string            // etcd's binary and arguments, for a restart
	apiArgs  []string            // kube-apiserver's binary and arguments, for a restart
	ownsDir  bool
}

// Pid is the process id of name (etcd, kube-apiserver), 0 when it does not run: for a benchmark's
// count of what the control plane spends.
func (e *Env) Pid(name string) int {
	for _, p := range e.procs {
		if p.Name == name {
			return p.Pid()
		}
	}
	return 0
}

// TB is the part of testing.TB Start needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	Logf(format string, args ...any)
	Failed() bool
}

// Start starts a control plane for a test and stops it when the test ends.
func Start(t TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	env, err := StartProcess(ctx, o)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log tail:\n%s", proc.Tail(filepath.Join(env.Dir, "kube-apiserver.log"), 30))
		}
		env.Stop()
	})
	return env
}

// BinDir is where the control-plane binaries are cached.
func BinDir() string {
	if d := os.Getenv("TABBY_CACHE"); d != "" {
		return filepath.Join(d, "bin")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "tabby", "bin")
}

func binary(name, envVar string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		return p, nil
	}
	p := filepath.Join(BinDir(), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found at %s: run `make controlplane` (hack/controlplane/build.sh) once, or set %s", name, p, envVar)
	}
	return p, nil
}

// Kubectl is the path of the kubectl `make controlplane` built next to the API server.
func Kubectl() string { return filepath.Join(BinDir(), "kubectl") }

// StartProcess starts a control plane that lives until Stop (the lab's use).
func StartProcess(ctx context.Context, o Options) (_ *Env, err error) {
	etcdBin, err := binary("etcd", "TABBY_ETCD")
	if err != nil {
		return nil, err
	}
	apiBin, err := binary("kube-apiserver", "TABBY_KUBE_APISERVER")
	if err != nil {
		return nil, err
	}
	if o.BindAddress == "" {
		o.BindAddress = "127.0.0.1"
	}
	env := &Env{Dir: o.Dir}
	if env.Dir == "" {
		if env.Dir, err = os.MkdirTemp("", "tabby-testenv-"); err != nil {
			return nil, err
		}
		env.ownsDir = true
	}
	defer func() {
		if err != nil {
			env.Stop()
		}
	}()
	ports, err := FreePorts(o.BindAddress, 3)
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://%s:%d", o.BindAddress, ports[0])
	peerURL := fmt.Sprintf("http://%s:%d", o.BindAddress, ports[1])
	env.etcdArgs = []string{etcdBin,
		"--name=testenv", "--data-dir=" + filepath.Join(env.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testenv=" + peerURL, "--log-level=warn",
		// A throwaway store: durability across power loss buys nothing here.
		"--unsafe-no-fsync",
	}
	if err := env.spawn("etcd", env.etcdArgs...); err != nil {
		return nil, err
	}
	apiEtcdURL := etcdURL
	if o.EtcdRelay {
		ln, err := net.Listen("tcp", net.JoinHostPort(o.BindAddress, "0"))
		if err != nil {
			return nil, fmt.Errorf("etcd relay: %w", err)
		}
		env.etcd = netnsfwd.Serve(ln, net.JoinHostPort(o.BindAddress, strconv.Itoa(ports[0])))
		apiEtcdURL = "http://" + env.etcd.Addr()
	}

	token, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(env.Dir, "tokens.csv"), []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}
	saKey := filepath.Join(env.Dir, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return nil, err
	}
	env.URL = fmt.Sprintf("https://%s:%d", o.BindAddress, ports[2])
	env.SAKey = saKey
	certDir := filepath.Join(env.Dir, "certs")
	env.ServingCert = filepath.Join(certDir, "apiserver.crt")
	serviceRange := ServiceCIDR
	if o.DualStackServices {
		serviceRange += "," + ServiceCIDRv6
	}
	args := []string{
		"--etcd-servers=" + apiEtcdURL,
		"--bind-address=" + o.BindAddress, "--advertise-address=" + o.BindAddress,
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + filepath.Join(env.Dir, "tokens.csv"),
		"--service-account-key-file=" + saKey, "--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=RBAC", "--service-cluster-ip-range=" + serviceRange,
		"--enable-priority-and-fairness=false",
		"--allow-privileged=true", "--profiling=false", "--v=0",
	}
	if o.Cluster {
		// Node names are not in any DNS: exec, logs and port-forward dial the node's address.
		args = append(args, "--kubelet-preferred-address-types=InternalIP")
	} else {
		args = append(args,
			// Nothing on the nodes' side reads the `kubernetes` Service.
			"--endpoint-reconciler-type=none",
			// No controller-manager runs to create service accounts; pods (the lab's) must
			// still be creatable.
			"--disable-admission-plugins=ServiceAccount")
	}
	env.apiArgs = append([]string{apiBin}, args...)
	if err := env.spawn("kube-apiserver", env.apiArgs...); err != nil {
		return nil, err
	}

	if err := waitReady(ctx, env.URL, token); err != nil {
		return nil, fmt.Errorf("kube-apiserver not ready: %w (log: %s)", err, proc.Tail(filepath.Join(env.Dir, "kube-apiserver.log"), 10))
	}
	if err := env.connect(token); err != nil {
		return nil, err
	}
	if !o.SkipCRDs {
		if err := InstallCRDs(ctx, env.Config); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// Connect reaches a control plane someone else runs at url (a lab inside a VM reaching its
// host's): an admin kubeconfig in dir and clients, nothing to stop.
func Connect(dir, url, token string) (*Env, error) {
	env := &Env{Dir: dir, URL: url}
	if err := env.connect(token); err != nil {
		return nil, err
	}
	return env, nil
}

// connect makes the admin kubeconfig and clients of the API server at e.URL.
func (e *Env) connect(token string) (err error) {
	e.Config = &rest.Config{Host: e.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 200, Burst: 400}
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	if err := WriteKubeconfig(e.Kubeconfig, e.URL, token); err != nil {
		return err
	}
	if e.Client, err = client.New(e.Config); err != nil {
		return err
	}
	e.Kube, err = kubernetes.NewForConfig(e.Config)
	return err
}

// WriteKubeconfig writes an admin kubeconfig for url and token.
func WriteKubeconfig(path, url, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: url, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	cfg.CurrentContext = "testenv"
	return clientcmd.WriteToFile(*cfg, path)
}

// InstallCRDs creates tabby's CRDs (apis/crds) and waits until they are established.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	entries, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil {
		return err
	}
	var all []apiextv1.CustomResourceDefinition
	for _, name := range entries {
		raw, err := crds.FS.ReadFile(name)
		if err != nil {
			return err
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return fmt.Errorf("parse %s: %w", name, err)
		}
		all = append(all, crd)
	}
	return ApplyCRDs(ctx, cfg, all)
}

// ApplyCRDs creates the CRDs (one that exists is left as it is) and waits until they are
// established (the lab's come from the Helm chart).
func ApplyCRDs(ctx context.Context, cfg *rest.Config, crds []apiextv1.CustomResourceDefinition) error {
	cs, err := apiext.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i := range crds {
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crds[i], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crds[i].Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitFor(ctx, func() (bool, error) {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port and etcd, as an
// upgrade of the control plane does, and returns when the new one is ready. Its watch cache starts
// empty: a watch from an older resourceVersion may then be told it is too old.
func (e *Env) RestartAPIServer(ctx context.Context) error {
	if err := e.StopAPIServer(syscall.SIGTERM); err != nil {
		return err
	}
	return e.StartAPIServer(ctx)
}

// StopAPIServer stops kube-apiserver with sig (SIGKILL: a crash) and waits until it is gone;
// StartAPIServer brings it back. Clients see refused connections in between.
func (e *Env) StopAPIServer(sig syscall.Signal) error { return e.stop("kube-apiserver", sig) }

// StartAPIServer starts a stopped kube-apiserver on the same port and etcd and returns when it is
// ready.
func (e *Env) StartAPIServer(ctx context.Context) error {
	if e.Pid("kube-apiserver") != 0 {
		return fmt.Errorf("start kube-apiserver: it runs")
	}
	if err := e.spawn("kube-apiserver", e.apiArgs...); err != nil {
		return err
	}
	if err := waitReady(ctx, e.URL, e.Config.BearerToken); err != nil {
		return fmt.Errorf("kube-apiserver not ready after a restart: %w (log: %s)", err, proc.Tail(filepath.Join(e.Dir, "kube-apiserver.log"), 10))
	}
	return nil
}

// RestartEtcd stops etcd with sig and starts it again on the same ports and data, returning
// when the API server answers /readyz again (it reconnects by itself).
func (e *Env) RestartEtcd(ctx context.Context, sig syscall.Signal) error {
	if err := e.stop("etcd", sig); err != nil {
		return err
	}
	if err := e.spawn("etcd", e.etcdArgs...); err != nil {
		return err
	}
	// Stop goes in reverse: etcd stays first, to outlive the API server.
	last := e.procs[len(e.procs)-1]
	e.procs = append([]*proc.Proc{last}, e.procs[:len(e.procs)-1]...)
	if err := waitReady(ctx, e.URL, e.Config.BearerToken); err != nil {
		return fmt.Errorf("kube-apiserver not ready after an etcd restart: %w (log: %s)", err, proc.Tail(filepath.Join(e.Dir, "etcd.log"), 10))
	}
	return nil
}

// SetEtcdLatency holds every request kube-apiserver sends etcd for d (the answers are not
// held); zero ends it. The control plane must have been started with Options.EtcdRelay.
func (e *Env) SetEtcdLatency(d time.Duration) error {
	if e.etcd == nil {
		return fmt.Errorf("etcd latency: the control plane runs without Options.EtcdRelay")
	}
	e.etcd.SetDelay(d)
	return nil
}

func (e *Env) stop(name string, sig syscall.Signal) error {
	i := slices.IndexFunc(e.procs, func(p *proc.Proc) bool { return p.Name == name })
	if i < 0 {
		return fmt.Errorf("stop %s: it does not run", name)
	}
	_ = e.procs[i].Stop(sig, 5*time.Second)
	e.procs = slices.Delete(e.procs, i, i+1)
	return nil
}

// Stop kills the processes and removes the data directory if Start made it.
func (e *Env) Stop() {
	// The API server first: it must not see its etcd go away while it serves.
	for i := len(e.procs) - 1; i >= 0; i-- {
		_ = e.procs[i].Stop(syscall.SIGTERM, 5*time.Second)
	}
	e.procs = nil
	if e.etcd != nil {
		e.etcd.Close()
		e.etcd = nil
	}
	if e.ownsDir {
		_ = os.RemoveAll(e.Dir)
	}
}

func (e *Env) spawn(name string, argv ...string) error {
	p, err := proc.Start(name, argv, proc.Options{Log: filepath.Join(e.Dir, name+".log")})
	if err != nil {
		return err
	}
	e.procs = append(e.procs, p)
	return nil
}

func waitReady(ctx context.Context, url, token string) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return waitFor(ctx, func() (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// waitFor polls cond until it holds, fails, or ctx ends.
func waitFor(ctx context.Context, cond func() (bool, error)) error {
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
			}
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// FreePorts finds n free TCP ports on host (for a process the caller starts).
func FreePorts(host string, n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600)
}
