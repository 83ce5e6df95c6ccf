package config

import (
	"strings"
	"testing"
)

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"tabby"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName == "" || c.IPAMSocket != "/var/run/tabby/ipam.sock" || c.IPAM.Type != IPAMType || c.Timeout().Seconds() != 60 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if !c.SocketEnabled() {
		t.Fatal("socket must be enabled by default")
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ conf, want string }{
		{`{"name":"n","mtu":10}`, "mtu 10"},
		{`{"name":"n","mtu":70000}`, "mtu 70000"},
		{`{"name":"n","ipam":{"type":"host-local"}}`, `ipam.type "host-local"`},
		{`{"name":"n","ipam":{"type":"tabby-ipam","pools":["a",""]}}`, "ipam.pools[1]"},
		{`{"name":"n","ipam":{"type":"tabby-ipam","assign_ipv6":"yes"}}`, `ipam.assign_ipv6 "yes"`},
		{`{"name":"n","ipam":{"type":"tabby-ipam","assign_ipv4":"false","assign_ipv6":"false"}}`, "both"},
		{`{"name":"n","logLevel":"loud"}`, `logLevel "loud"`},
		{`{"name":"n","timeoutSeconds":-1}`, "timeoutSeconds -1"},
		{`{"name":"n","timeoutSeconds":10000000000}`, "timeoutSeconds 10000000000"},
		{`{"cniVersion":"1.0.0","name":"n","prevResult":{"cniVersion":"1.0.0","ips":[{}]}}`, "prevResult.ips[0].address"},
		{`{"name":`, "decode network configuration"},
	} {
		_, err := Parse([]byte(tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error naming %q", tc.conf, err, tc.want)
		}
	}
}

func TestArgsAndHandle(t *testing.T) {
	a, err := ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;FOO=bar")
	if err != nil {
		t.Fatal(err)
	}
	if a.K8S_POD_NAMESPACE != "default" || a.K8S_POD_NAME != "web-0" {
		t.Fatalf("args %+v", a)
	}
	if h := Handle("k8s-pod-network", "abc"); h != "k8s-pod-network.abc" {
		t.Fatalf("handle %q", h)
	}
}
