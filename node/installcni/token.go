package installcni

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// CNITokenLifetime is how long a token in the plugins' kubeconfig is valid. tabby-node replaces
// it long before (KeepKubeconfigFresh); the lifetime matters only while no tabby-node runs on
// the node, as between the old pod and the new one of a rolling upgrade.
const CNITokenLifetime = 24 * time.Hour

// RequestToken asks the API server, with the pod's own token, for a token of the same service
// account that is not bound to the pod (TokenRequest). The pod's token stops working the moment
// its pod is deleted, which every rolling upgrade does before the next pod has written a new
// kubeconfig; the plugins need the API server in that gap, when tabby-node's socket is down.
func RequestToken(ctx context.Context, apiServer string, podToken, ca []byte) (string, error) {
	ns, name, err := serviceAccountOf(string(podToken))
	if err != nil {
		return "", err
	}
	// A plain request: client-go's clientset would link every API group into tabby-node.
	hc, err := rest.HTTPClientFor(&rest.Config{
		BearerToken: strings.TrimSpace(string(podToken)), TLSClientConfig: rest.TLSClientConfig{CAData: ca}, Timeout: 15 * time.Second,
	})
	if err != nil {
		return "", err
	}
	exp := int64(CNITokenLifetime / time.Second)
	body, err := json.Marshal(&authenticationv1.TokenRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
		Spec:     authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
	})
	if err != nil {
		return "", err
	}
	url := strings.TrimSuffix(apiServer, "/") + "/api/v1/namespaces/" + ns + "/serviceaccounts/" + name + "/token"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("request a token of service account %s/%s: %w", ns, name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("request a token of service account %s/%s: %w", ns, name, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("request a token of service account %s/%s: %s: %s", ns, name, resp.Status, bytes.TrimSpace(raw))
	}
	var tr authenticationv1.TokenRequest
	if err := json.Unmarshal(raw, &tr); err != nil {
		return "", fmt.Errorf("request a token of service account %s/%s: %w", ns, name, err)
	}
	if tr.Status.Token == "" {
		return "", fmt.Errorf("request a token of service account %s/%s: empty token", ns, name)
	}
	return tr.Status.Token, nil
}

// serviceAccountOf reads the namespace and name of the service account a token belongs to from
// its claims (subject system:serviceaccount:NS:NAME). The API server verifies the token; this
// only says whose token to ask for.
func serviceAccountOf(token string) (ns, name string, err error) {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return "", "", errors.New("service account token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", "", fmt.Errorf("service account token claims: %w", err)
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", "", fmt.Errorf("service account token claims: %w", err)
	}
	rest, ok := strings.CutPrefix(claims.Sub, "system:serviceaccount:")
	ns, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || name == "" {
		return "", "", fmt.Errorf("service account token subject %q: want system:serviceaccount:NAMESPACE:NAME", claims.Sub)
	}
	return ns, name, nil
}
