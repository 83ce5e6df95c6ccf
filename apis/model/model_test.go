package model

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/selector"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Equal compares every field: one it missed would hide a change from the agents (the syncer
// sends a NodeUpdate or PoolUpdate only when Equal says the object changed).
func TestEqualSeesEveryField(t *testing.T) {
	node := Node{Name: "n", Labels: map[string]string{"a": "1"}}
	eachField(t, &node, func(other any) bool { return node.Equal(*other.(*Node)) })
	pool := Pool{Name: "p", CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26, IPIPMode: v1.IPIPModeNever}
	eachField(t, &pool, func(other any) bool { return pool.Equal(*other.(*Pool)) })
	svc := Service{Key: "default/web"}
	eachField(t, &svc, func(other any) bool { return svc.Equal(*other.(*Service)) })
}

// eachField changes one field of a copy of *base at a time and wants equal to say it differs.
// Pool.Selector is NodeSelector parsed: it changes with it.
func eachField(t *testing.T, base any, equal func(other any) bool) {
	t.Helper()
	v := reflect.ValueOf(base).Elem()
	if !equal(base) {
		t.Fatalf("%T is not equal to itself", base)
	}
	for i := range v.NumField() {
		other := reflect.New(v.Type())
		other.Elem().Set(v)
		if name := v.Type().Field(i).Name; name == "Labels" {
			other.Elem().Field(i).Set(reflect.ValueOf(map[string]string{"a": "1"}))
		}
		f := other.Elem().Field(i)
		switch x := f.Addr().Interface().(type) {
		case *string:
			*x = "changed"
		case *map[string]string:
			*x = map[string]string{"a": "2"}
		case *ipfamily.Pair[netip.Prefix]:
			x.Set(ipfamily.IPv6, netip.MustParsePrefix("2001:db8::1/64"))
		case *ipfamily.Pair[netip.Addr]:
			x.Set(ipfamily.IPv6, netip.MustParseAddr("2001:db8::1"))
		case *netip.Prefix:
			*x = netip.MustParsePrefix("198.51.100.0/24")
		case *netip.Addr:
			*x = netip.MustParseAddr("198.51.100.1")
		case *uint32:
			*x = 65001
		case *int:
			*x++
		case *bool:
			*x = !*x
		case *time.Time:
			*x = time.Unix(1, 0)
		case *v1.IPIPMode:
			*x = v1.IPIPModeAlways
		case *v1.VXLANMode:
			*x = v1.VXLANModeAlways
		case *[]v1.IPPoolUse:
			*x = []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}
		case *v1.AssignmentMode:
			*x = v1.AssignmentModeManual
		case *[]netip.Addr:
			*x = []netip.Addr{netip.MustParseAddr("198.51.100.9")}
		case *ipfamily.Pair[MAC]:
			x.Set(ipfamily.IPv6, MAC{0x66, 1, 2, 3, 4, 5})
		case *selector.Selector:
			continue // NodeSelector's
		default:
			t.Fatalf("%s.%s of type %s: teach this test (and Equal) about it", v.Type().Name(), v.Type().Field(i).Name, f.Type())
		}
		if equal(other.Interface()) {
			t.Errorf("%s.Equal misses field %s", v.Type().Name(), v.Type().Field(i).Name)
		}
	}
}
