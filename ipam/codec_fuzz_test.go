package ipam

import (
	"encoding/binary"
	"encoding/json"
	"maps"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// FuzzDecodeBlock: any IPAMBlock the API server could hold (any JSON that decodes into one)
// is read without a panic. A block DecodeBlock accepts is consistent: every ordinal is an
// address of the block, written back it is the same allocations; one it refuses is refused
// with the block, the field and the value named.
func FuzzDecodeBlock(f *testing.F) {
	for _, b := range []string{
		`{"metadata":{"name":"10-244-0-0-26"},"spec":{"cidr":"10.244.0.0/26","affinity":"host:node-a","allocations":{"0":{"handle":"k8s-pod-network.abc","namespace":"default","pod":"web-0","node":"node-a"},"63":{"handle":"tunnel.node-a"}}}}`,
		`{"metadata":{"name":"fd00-10-244--40-122"},"spec":{"cidr":"fd00:10:244::40/122","allocations":{"5":{"handle":"h"}}}}`,
		`{"metadata":{"name":"big"},"spec":{"cidr":"10.244.0.0/20","allocations":{"4095":{"handle":"h"}}}}`,
		`{"metadata":{"name":"host"},"spec":{"cidr":"10.244.0.5/32","allocations":{"0":{"handle":"h"}}}}`,
		`{"metadata":{"name":"empty"},"spec":{"cidr":"10.244.0.0/26"}}`,
		`{"metadata":{"name":"zero"},"spec":{"cidr":"10.244.0.0/26","allocations":{"03":{"handle":"h"}}}}`,
		`{"metadata":{"name":"sign"},"spec":{"cidr":"10.244.0.0/26","allocations":{"+3":{"handle":"h"}}}}`,
		`{"metadata":{"name":"neg"},"spec":{"cidr":"10.244.0.0/26","allocations":{"-1":{"handle":"h"}}}}`,
		`{"metadata":{"name":"past"},"spec":{"cidr":"10.244.0.0/26","allocations":{"64":{"handle":"h"}}}}`,
		`{"metadata":{"name":"wrap"},"spec":{"cidr":"10.244.0.0/26","allocations":{"65536":{"handle":"h"}}}}`,
		`{"metadata":{"name":"word"},"spec":{"cidr":"10.244.0.0/26","allocations":{"three":{"handle":"h"}}}}`,
		`{"metadata":{"name":"hostbits"},"spec":{"cidr":"10.244.0.1/26"}}`,
		`{"metadata":{"name":"huge"},"spec":{"cidr":"10.0.0.0/8"}}`,
		`{"metadata":{"name":"mapped"},"spec":{"cidr":"::ffff:10.244.0.0/122"}}`,
		`{"spec":{"cidr":""}}`, `{}`, `null`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b v1.IPAMBlock
		if json.Unmarshal(raw, &b) != nil {
			return
		}
		c, allocs, err := DecodeBlock(&b)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "IPAMBlock "+b.Name+": spec.") || !strings.Contains(msg, "\"") {
				t.Fatalf("DecodeBlock(%s): %q does not name the block, the field and the value", raw, msg)
			}
			return
		}
		for o := range allocs {
			ip := AddrAt(c, o)
			if back, ok := OrdinalOf(c, ip); !ok || back != o {
				t.Fatalf("DecodeBlock(%s): ordinal %d is %s, outside %s or read back as %d", raw, o, ip, c, back)
			}
		}
		if got, want := EncodeAllocations(allocs), b.Spec.Allocations; len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeBlock(%s) = %v, written back %v", raw, allocs, got)
		}
		// What the allocator and the readers see agrees: an ordinal is free exactly when no
		// allocation holds it.
		if o, ok := freeOrdinal(c, &b, 0); ok {
			if _, held := allocs[o]; held {
				t.Fatalf("DecodeBlock(%s): ordinal %d is held, but the allocator would hand it out", raw, o)
			}
		} else if len(allocs) < blockLen(c) {
			t.Fatalf("DecodeBlock(%s): %d of %d addresses held, but the allocator finds none free", raw, len(allocs), blockLen(c))
		}
	})
}

// FuzzBlockRoundTrip: a block made of a prefix and allocations, written as the API server stores
// it (JSON) and read back, is the same block. The input picks the family, the block's address
// and size, and the allocations' ordinals and owners.
func FuzzBlockRoundTrip(f *testing.F) {
	f.Add(false, []byte{10, 244, 0, 0}, uint8(26), []byte{0, 0, 0, 63, 1, 7})
	f.Add(true, []byte{0xfd, 0, 0, 0x10, 2, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40}, uint8(122), []byte{0, 5, 0, 63})
	f.Add(false, []byte{10, 244, 16, 0}, uint8(20), []byte{0x0f, 0xff, 0, 0})
	f.Add(false, []byte{10, 244, 0, 5}, uint8(32), []byte{0, 0})
	f.Fuzz(func(t *testing.T, v6 bool, addr []byte, size uint8, ordinals []byte) {
		lo, hi := v1.MinBlockSizeIPv4, v1.MaxBlockSizeIPv4
		n := 4
		if v6 {
			lo, hi, n = v1.MinBlockSizeIPv6, v1.MaxBlockSizeIPv6, 16
		}
		a := make([]byte, n)
		copy(a, addr)
		ip, _ := netip.AddrFromSlice(a)
		bits := lo + int(size)%(hi-lo+1)
		c, _ := ip.Prefix(bits)
		allocs := map[int]v1.Allocation{}
		owners := []v1.Allocation{{Handle: "k8s-pod-network.abc", Namespace: "default", Pod: "web-0", Node: "node-a"}, {Handle: "tunnel.node-b"}, {Handle: "k8s-pod-network.def", Node: "node-c"}}
		for i := 0; i+1 < len(ordinals); i += 2 {
			o := int(binary.BigEndian.Uint16(ordinals[i:])) % blockLen(c)
			allocs[o] = owners[int(ordinals[i])%len(owners)]
		}
		b := v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(c)}, Spec: v1.IPAMBlockSpec{CIDR: c.String(), Affinity: "host:node-a", Allocations: EncodeAllocations(allocs)}}
		raw, err := json.Marshal(&b)
		if err != nil {
			t.Fatal(err)
		}
		var back v1.IPAMBlock
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("read back %s: %v", raw, err)
		}
		gotC, got, err := DecodeBlock(&back)
		if err != nil {
			t.Fatalf("DecodeBlock(%s): %v", raw, err)
		}
		if gotC != c || !maps.Equal(got, allocs) {
			t.Fatalf("block %s %v written as %s read back as %s %v", c, allocs, raw, gotC, got)
		}
	})
}

// A key the allocator would never write is no allocation to any reader: before, a reader took
// "03" or "+3" for ordinal 3 (which the allocator saw free) and the garbage collector took "64"
// for an address past the block.
func TestReadersIgnoreKeysTheAllocatorNeverWrites(t *testing.T) {
	b := &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "10-244-0-0-26"}, Spec: v1.IPAMBlockSpec{CIDR: "10.244.0.0/26", Allocations: map[string]v1.Allocation{
		"5": {Handle: "h"}, "03": {Handle: "h"}, "+4": {Handle: "h"}, "64": {Handle: "h"}, "-1": {Handle: "h"}, "65539": {Handle: "h"},
	}}}
	if got := allocationsOf(b, "h"); !reflect.DeepEqual(got, []int{5}) {
		t.Fatalf("allocationsOf = %v, want [5]", got)
	}
	c := netip.MustParsePrefix("10.244.0.0/26")
	owners := ownersOf(b, c, "pool")
	if len(owners) != 1 || owners[0].IP != netip.MustParseAddr("10.244.0.5") {
		t.Fatalf("ownersOf = %+v, want 10.244.0.5 alone", owners)
	}
	if _, _, err := DecodeBlock(b); err == nil || !strings.Contains(err.Error(), `spec.allocations: allocation key "+4"`) {
		t.Fatalf("DecodeBlock: %v, want the least bad key named", err)
	}
}
