package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// The fields Parse's errors start with: a refusal names what to fix.
var errorFields = []string{
	"decode network configuration", "prevResult", "nodename", "ipam.type", "mtu ", "timeoutSeconds ",
	"ipam.assign_ipv4 ", "ipam.assign_ipv6 ", "ipam.assign_ipv4 and ipam.assign_ipv6", "ipam.pools[", "logLevel ",
}

// FuzzParse: Parse never panics; a configuration it accepts has a usable deadline and reads
// back the same once written out (defaults included); a refusal names the field.
func FuzzParse(f *testing.F) {
	for _, conf := range []string{
		`{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"tabby"}`,
		`{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"tabby","nodename":"node-a","mtu":1450,"nodeAddressInterface":"eth0",
		  "timeoutSeconds":30,"logLevel":"debug","ipamSocket":"none","kubeconfig":"/etc/cni/net.d/tabby-kubeconfig",
		  "ipam":{"type":"tabby-ipam","pools":["default-ipv4","fd00:10:244::/48"],"assign_ipv4":"true","assign_ipv6":"false","strictAffinity":true},
		  "capabilities":{"portMappings":true},"dns":{"nameservers":["10.96.0.10"]}}`,
		`{"cniVersion":"1.0.0","name":"n","type":"tabby","nodename":"node-a","prevResult":{"cniVersion":"1.0.0",
		  "interfaces":[{"name":"eth0"}],"ips":[{"address":"10.244.0.5/32","interface":0},{"address":"fd00:10:244::5/128"}]}}`,
		`{"cniVersion":"0.3.1","name":"n","type":"tabby","nodename":"node-a","prevResult":{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.244.0.5/32"}]}}`,
		`{"name":"n","mtu":10}`, `{"name":"n","mtu":70000}`, `{"name":"n","ipam":{"type":"host-local"}}`,
		`{"name":"n","ipam":{"type":"tabby-ipam","pools":["a",""]}}`, `{"name":"n","ipam":{"type":"tabby-ipam","assign_ipv6":"yes"}}`,
		`{"name":"n","ipam":{"type":"tabby-ipam","assign_ipv4":"false","assign_ipv6":"false"}}`, `{"name":"n","logLevel":"loud"}`,
		`{"name":"n","timeoutSeconds":-1}`, `{"name":"n","timeoutSeconds":100000000000}`, `{"name":`, `{"name":"n","mtu":"1500"}`,
		`{"name":"n","prevResult":{"cniVersion":"9.9.9"}}`, `{"name":"n","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"banana"}]}}`,
		`null`, `[]`, ``,
	} {
		f.Add([]byte(conf))
	}
	f.Fuzz(func(t *testing.T, stdin []byte) {
		c, err := Parse(stdin)
		if err != nil {
			for _, name := range errorFields {
				if strings.HasPrefix(err.Error(), name) {
					return
				}
			}
			t.Fatalf("Parse(%s): %q names no field", stdin, err)
		}
		if c.Timeout() <= 0 {
			t.Fatalf("Parse(%s) accepted a configuration with deadline %v", stdin, c.Timeout())
		}
		if _, err := c.PrevAddresses(); err != nil {
			t.Fatalf("Parse(%s) accepted a prevResult whose addresses cannot be read: %v", stdin, err)
		}
		out := write(t, c)
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(%s) accepted, but not its own output %s: %v", stdin, out, err)
		}
		if back := write(t, again); string(back) != string(out) {
			t.Fatalf("Parse(%s) written out is\n%s\nread back and written out again\n%s", stdin, out, back)
		}
	})
}

// write is a configuration as the runtime would pass it: the value, not the pointer, since the
// embedded CNI NetConf's MarshalJSON would write its own fields alone; prevResult raw again
// (Parse leaves it parsed only).
func write(t *testing.T, c *NetConf) []byte {
	w := *c
	if c.PrevResult != nil {
		raw, err := json.Marshal(c.PrevResult)
		if err != nil {
			t.Fatalf("write prevResult %+v: %v", c.PrevResult, err)
		}
		if err := json.Unmarshal(raw, &w.RawPrevResult); err != nil {
			t.Fatalf("read back prevResult %s: %v", raw, err)
		}
	}
	out, err := json.Marshal(w)
	if err != nil {
		t.Fatalf("write %+v: %v", c, err)
	}
	return out
}

// FuzzParseArgs: ParseArgs never panics; what it reads, written out as a runtime would, reads
// back the same; a refusal names CNI_ARGS.
func FuzzParseArgs(f *testing.F) {
	for _, args := range []string{
		"", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;FOO=bar",
		"K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-5d78c9869d-x7k2p;K8S_POD_UID=3f1e0c1e-5a9b-4f2c-9d7e-2b8c1a0e4f6d",
		"IgnoreUnknown=true", "IgnoreUnknown=maybe", "K8S_POD_NAME", "K8S_POD_NAME=a=b", ";;", "=", "CommonArgs=x", "K8S_POD_NAME=",
	} {
		f.Add(args)
	}
	f.Fuzz(func(t *testing.T, args string) {
		a, err := ParseArgs(args)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "CNI_ARGS ") {
				t.Fatalf("ParseArgs(%q): %q does not name CNI_ARGS", args, err)
			}
			return
		}
		out := strings.Join([]string{
			"IgnoreUnknown=" + boolArg(bool(a.IgnoreUnknown)),
			"K8S_POD_NAMESPACE=" + string(a.K8S_POD_NAMESPACE), "K8S_POD_NAME=" + string(a.K8S_POD_NAME),
			"K8S_POD_INFRA_CONTAINER_ID=" + string(a.K8S_POD_INFRA_CONTAINER_ID), "K8S_POD_UID=" + string(a.K8S_POD_UID),
		}, ";")
		again, err := ParseArgs(out)
		if err != nil {
			t.Fatalf("ParseArgs(%q) = %+v, written out as %q: %v", args, a, out, err)
		}
		if *again != *a {
			t.Fatalf("ParseArgs(%q) = %+v; written out and read back %+v", args, a, again)
		}
	})
}

func boolArg(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
