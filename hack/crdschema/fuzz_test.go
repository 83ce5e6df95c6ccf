package crdschema

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
)

// FuzzIPPool: for every generated IPPool, ParseIPPool and the API server's schema (OpenAPI, list
// types, CEL rules, from the generated CRD) both accept it or both refuse it naming a field in
// common; only a selector's syntax, which the schema cannot express, is refused here alone.
func FuzzIPPool(f *testing.F) {
	for _, tc := range validation.Cases {
		if p, ok := tc.Obj.(*v1.IPPool); ok {
			s := p.Spec
			f.Add(s.CIDR, s.BlockSize, string(s.IPIPMode), string(s.VXLANMode), joinUses(s.AllowedUses), string(s.AssignmentMode), s.NodeSelector)
		}
	}
	for _, s := range []v1.IPPoolSpec{
		{CIDR: "10.244.0.0/16", NodeSelector: "zone == 'a'", AllowedUses: []v1.IPPoolUse{v1.IPPoolUseWorkload, v1.IPPoolUseWorkload}},
		{CIDR: "10.244.0.0/16", NodeSelector: "zone == "},
		{CIDR: "198.51.100.192/27", AllowedUses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}, NodeSelector: "all()"},
		{CIDR: "1111:2222:3333:4444:5555:6666:7.7.7.0/120", BlockSize: 122},
		{CIDR: "fd00:10:244::/48%eth0"},
		{CIDR: "0000:0000:0000:0000:0000:0000:100.100.100.100/128"},
		{CIDR: "FD00:10:244::/48"},
		{CIDR: "fd00:10:244:0:0:0:0:0/48"},
		{CIDR: "010.244.0.0/16"},
		{CIDR: "10.244.0.0/016"},
		{CIDR: "0.0.0.0/0", BlockSize: 20},
		{CIDR: "::/0", BlockSize: 116},
		{CIDR: "10.244.0.0/16", BlockSize: -26},
		{CIDR: "10.244.0.0/16", NodeSelector: strings.Repeat("x", 1020) + " == 'a'"},
	} {
		f.Add(s.CIDR, s.BlockSize, string(s.IPIPMode), string(s.VXLANMode), joinUses(s.AllowedUses), string(s.AssignmentMode), s.NodeSelector)
	}
	schema := schemaFor(f, "IPPool")
	f.Fuzz(func(t *testing.T, cidr string, blockSize int, ipip, vxlan, uses, assignment, nodeSelector string) {
		p := &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}, Spec: v1.IPPoolSpec{
			CIDR: cidr, BlockSize: blockSize, IPIPMode: v1.IPIPMode(ipip), VXLANMode: v1.VXLANMode(vxlan),
			AssignmentMode: v1.AssignmentMode(assignment), NodeSelector: nodeSelector,
		}}
		if uses != "" {
			for _, u := range strings.Split(uses, ",") {
				p.Spec.AllowedUses = append(p.Spec.AllowedUses, v1.IPPoolUse(u))
			}
		}
		p = sent(t, p)
		agree(t, p, validation.IPPool(p), schema)
	})
}

func joinUses(uses []v1.IPPoolUse) string {
	s := make([]string, len(uses))
	for i, u := range uses {
		s[i] = string(u)
	}
	return strings.Join(s, ",")
}

// FuzzBGPPeer is FuzzIPPool for BGPPeers. Durations are in nanoseconds, 0 for unset; a negative
// multiplier is an unset one.
func FuzzBGPPeer(f *testing.F) {
	add := func(s v1.BGPPeerSpec) {
		var name, key string
		if s.Password != nil && s.Password.SecretKeyRef != nil {
			name, key = s.Password.SecretKeyRef.Name, s.Password.SecretKeyRef.Key
		}
		var bfdOn, enabled bool
		var minRx, minTx int64
		mult := int32(-1)
		if b := s.BFD; b != nil {
			bfdOn, enabled = true, b.Enabled
			if b.MinRx != nil {
				minRx = int64(b.MinRx.Duration)
			}
			if b.MinTx != nil {
				minTx = int64(b.MinTx.Duration)
			}
			if b.Multiplier != nil {
				mult = *b.Multiplier
			}
		}
		var restart int64
		if s.MaxRestartTime != nil {
			restart = int64(s.MaxRestartTime.Duration)
		}
		f.Add(s.Node, s.NodeSelector, s.PeerIP, s.PeerSelector, s.ASNumber, s.EBGPMultihop, s.Password != nil, name, key,
			bfdOn, enabled, minRx, minTx, mult, restart, strings.Join(s.Filters, ","))
	}
	for _, tc := range validation.Cases {
		if p, ok := tc.Obj.(*v1.BGPPeer); ok {
			add(p.Spec)
		}
	}
	for _, s := range []v1.BGPPeerSpec{
		{PeerIP: "198.51.100.1", ASNumber: 65001, Filters: []string{"a", "b", "a"}},
		{PeerIP: "198.51.100.1", ASNumber: 65001, Filters: []string{strings.Repeat("f", 254)}},
		{PeerIP: "198.51.100.1", ASNumber: 65001, Filters: strings.Split("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", ",")},
		{PeerIP: "198.51.100.1", ASNumber: 65001, MaxRestartTime: &metav1.Duration{Duration: 500 * time.Millisecond}},
		{PeerIP: "198.51.100.1", ASNumber: 65001, MaxRestartTime: &metav1.Duration{Duration: -time.Minute}},
		{PeerIP: "198.51.100.1", ASNumber: 65001, Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "tor"}}},
		{PeerIP: "198.51.100.1", ASNumber: 65001, Password: &v1.BGPPassword{}},
		{PeerIP: "198.51.100.1:00179", ASNumber: 65001},
		{PeerIP: "198.51.100.1:0", ASNumber: 65001},
		{PeerIP: "[1111:2222:3333:4444:5555:6666:7.7.7.7]:65535", ASNumber: 65001},
		{PeerIP: "fe80::1%eth0", ASNumber: 65001},
		{PeerIP: "[0000:0000:0000:0000:0000:0000:100.100.100.100]:179", ASNumber: 65001},
		{PeerIP: "0000:0000:0000:0000:0000:0000:100.100.100.100", ASNumber: 65001},
		{PeerIP: "2001:DB8::1", ASNumber: 65001},
		{PeerIP: "198.51.100.1:65536", ASNumber: 65001},
		{PeerIP: "[::ffff:198.51.100.1]:179", ASNumber: 65001},
		{PeerIP: "[fe80::1]:179", ASNumber: 65001},
		{PeerIP: "::ffff:198.51.100.1", ASNumber: 65001},
		{PeerIP: "198.51.100.1", ASNumber: 65001, EBGPMultihop: 256},
		{PeerIP: "198.51.100.1", ASNumber: 65001, EBGPMultihop: -1},
		{PeerSelector: "has(tabby.dev/route-reflector", NodeSelector: "all()"},
		{PeerSelector: "all()", Node: strings.Repeat("n", 254)},
	} {
		add(s)
	}
	schema := schemaFor(f, "BGPPeer")
	f.Fuzz(func(t *testing.T, node, nodeSelector, peerIP, peerSelector string, asNumber uint32, ebgpMultihop int32,
		password bool, secretName, secretKey string, bfdOn, bfdEnabled bool, minRx, minTx int64, multiplier int32, maxRestart int64, filters string) {
		p := &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}, Spec: v1.BGPPeerSpec{
			Node: node, NodeSelector: nodeSelector, PeerIP: peerIP, PeerSelector: peerSelector, ASNumber: asNumber, EBGPMultihop: ebgpMultihop,
		}}
		if password {
			p.Spec.Password = &v1.BGPPassword{}
			if secretName != "" || secretKey != "" {
				p.Spec.Password.SecretKeyRef = &v1.SecretKeyRef{Name: secretName, Key: secretKey}
			}
		}
		if bfdOn {
			b := &v1.BFD{Enabled: bfdEnabled}
			if minRx != 0 {
				b.MinRx = &metav1.Duration{Duration: time.Duration(minRx)}
			}
			if minTx != 0 {
				b.MinTx = &metav1.Duration{Duration: time.Duration(minTx)}
			}
			if multiplier >= 0 {
				b.Multiplier = &multiplier
			}
			p.Spec.BFD = b
		}
		if maxRestart != 0 {
			p.Spec.MaxRestartTime = &metav1.Duration{Duration: time.Duration(maxRestart)}
		}
		if filters != "" {
			p.Spec.Filters = strings.Split(filters, ",")
		}
		p = sent(t, p)
		agree(t, p, validation.BGPPeer(p), schema)
	})
}

// sent is obj as the API server and the agents see it: written as JSON (a string that is not
// UTF-8 is not sent as it is) and read back.
func sent[T any](t *testing.T, obj *T) *T {
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("write %+v: %v", obj, err)
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("read back %s: %v", raw, err)
	}
	return out
}
