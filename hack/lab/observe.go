package lab

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/netnsfwd"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/observe"
)

// ObservePort is where every tabby-node serves its observation endpoint inside its namespace
// (the chart's observe.port).
const ObservePort = observe.DefaultPort

// ObserveSecret is the lab's copy of the chart's Secret of the endpoint's certificate: readers
// (tabbyctl flows) find the CA in it, as in a cluster the chart installed.
const ObserveSecret = "tabby-node-observe-tls"

// setupObserve issues the certificate every tabby-node serves its observation endpoint with,
// and writes the Secret the chart would.
func (l *Lab) setupObserve(ctx context.Context) error {
	if l.Opts.Stub || l.Opts.External != nil || l.Opts.KubeletNodes {
		return nil
	}
	dir := filepath.Join(l.Dir, "observe")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, cert, key, err := testenv.ServingCert(dir, observe.ServerName)
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for k, path := range map[string]string{"ca.crt": ca, "tls.crt": cert, "tls.key": key} {
		if data[k], err = os.ReadFile(path); err != nil {
			return err
		}
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ObserveSecret, Namespace: Namespace,
		Labels: map[string]string{"app.kubernetes.io/name": "tabby", "tabby.dev/info": "observe-tls"}},
		Type: corev1.SecretTypeTLS, Data: data}
	if _, err := l.Kube.CoreV1().Secrets(Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret %s/%s: %w", Namespace, ObserveSecret, err)
	}
	l.observeCA, l.observeCert, l.observeKey = ca, cert, key
	if l.Opts.FlowLogs {
		return l.SetFlowLogs(ctx, true)
	}
	return nil
}

// ObserveCA is the CA of the nodes' observation endpoint ("" when the lab runs none).
func (l *Lab) ObserveCA() string { return l.observeCA }

// SetFlowLogs turns felix's flow logs on or off on every node (FelixConfiguration default's
// flowLogs.enabled), with the shortest flush interval, so a test sees a flow within seconds.
func (l *Lab) SetFlowLogs(ctx context.Context, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"flowLogs":{"enabled":%t,"flushInterval":"1s"}}}`, on)
	_, err := l.Client.FelixConfigurations().Patch(ctx, v1.DefaultFelixConfigurationName, types.MergePatchType, []byte(patch))
	if apierrors.IsNotFound(err) {
		fc := &v1.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultFelixConfigurationName},
			Spec: v1.FelixConfigurationSpec{FlowLogs: &v1.FlowLogsSpec{Enabled: on, FlushInterval: &metav1.Duration{Duration: v1.MinFlowLogFlushInterval}}}}
		_, err = l.Client.FelixConfigurations().Create(ctx, fc)
	}
	if err != nil {
		return fmt.Errorf("FelixConfiguration flowLogs.enabled=%t: %w", on, err)
	}
	return nil
}

// forwardObserve makes node n's observation endpoint reachable from the root namespace, where
// tabbyctl runs, at a port of 127.0.0.1 that stays the node's across restarts: tabby-node
// records that address on its Node.
func (n *Node) forwardObserve() error {
	if n.lab.observeCert == "" {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("node %s: observation forwarder: %w", n.Name, err)
	}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(ObservePort))
	n.observeFwd = netnsfwd.ServeDial(ln, target, func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, n.NS, addr) })
	n.ObserveAddr = n.observeFwd.Addr()
	return nil
}

// observeArgs are tabby-node's flags of the observation endpoint.
func (n *Node) observeArgs() []string {
	if n.ObserveAddr == "" {
		return nil
	}
	return []string{"--observe-addr=:" + strconv.Itoa(ObservePort), "--observe-advertise-addr=" + n.ObserveAddr,
		"--observe-tls-cert-file=" + n.lab.observeCert, "--observe-tls-key-file=" + n.lab.observeKey}
}
