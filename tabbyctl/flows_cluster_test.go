package tabbyctl_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/observe"
)

// Against a real API server: without the chart's CA Secret tabbyctl says where it looked; with
// it, a node without the endpoint and a node whose endpoint does not answer are named, with why.
func TestFlowsNodesWithoutEndpoint(t *testing.T) {
	needCluster(t)
	r := run(t, "", "flows")
	if r.code == 0 || !strings.Contains(r.stderr, "no CA for the nodes' observation endpoint: no Secret labelled "+observe.CASecretSelector) || !strings.Contains(r.stderr, "--ca-file") {
		t.Fatalf("flows without the CA Secret: exit %d, stderr %q", r.code, r.stderr)
	}
	ca, _, _, err := testenv.ServingCert(t.TempDir(), observe.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tabby-node-observe-tls", Namespace: "default",
		Labels: map[string]string{"app.kubernetes.io/name": "tabby", "tabby.dev/info": "observe-tls"}}, Data: map[string][]byte{"ca.crt": pem}}
	if _, err := env.Kube.CoreV1().Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().Secrets("default").Delete(context.Background(), sec.Name, metav1.DeleteOptions{})
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	createNode(t, "flows-down", nil, map[string]string{v1.AnnotationObserveAddress: down})
	createNode(t, "flows-none", nil, nil)
	for node, want := range map[string]string{
		"flows-down": "warning: node flows-down: Get \"https://" + down + "/v1/flows\"",
		"flows-none": "warning: node flows-none: no tabby.dev/observe-address annotation",
	} {
		r := run(t, "", "flows", "--node", node)
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("flows --node %s: exit %d, stderr %q; want %q", node, r.code, r.stderr, want)
		}
	}
	if r := run(t, "", "flows", "--node", "flows-nowhere"); r.code == 0 || !strings.Contains(r.stderr, `node "flows-nowhere": no such Node`) {
		t.Errorf("flows --node of no Node: exit %d, stderr %q", r.code, r.stderr)
	}
}
