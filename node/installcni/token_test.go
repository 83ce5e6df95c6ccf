package installcni

import (
	"encoding/base64"
	"strings"
	"testing"
)

func jwt(claims string) string {
	return "e30." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".sig"
}

func TestServiceAccountOf(t *testing.T) {
	ns, name, err := serviceAccountOf(jwt(`{"sub":"system:serviceaccount:kube-system:tabby-node"}`) + "\n")
	if err != nil || ns != "kube-system" || name != "tabby-node" {
		t.Fatalf("got %q %q %v", ns, name, err)
	}
	for tok, want := range map[string]string{
		"tok-123":                           "not a JWT",
		jwt(`{"sub":"system:node:node-a"}`): "system:node:node-a",
		jwt(`{"sub":"system:serviceaccount:kube-system"}`): "system:serviceaccount:kube-system",
		"a.!!.c": "claims",
	} {
		if _, _, err := serviceAccountOf(tok); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", tok, err, want)
		}
	}
}
