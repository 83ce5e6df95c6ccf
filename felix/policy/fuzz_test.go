package policy

import (
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// FuzzRenderedAgreesWithVerdict is TestRenderedAgreesWithVerdictAdmin with the fuzzer choosing
// the clusters: the same generator (pods, namespaces, NetworkPolicies, AdminNetworkPolicies,
// ClusterNetworkPolicies, a baseline, invalid objects among them) draws its choices from the
// input's bytes. For each cluster rendering never panics, the rendered chains and sets walked
// by the kernel model decide every packet of the grid as Verdict does, and a State built from
// the same cluster renders the same.
func FuzzRenderedAgreesWithVerdict(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	seeds := rand.New(rand.NewPCG(20261128, 38))
	for range 8 {
		b := make([]byte, 64+seeds.IntN(256))
		for i := range b {
			b[i] = byte(seeds.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, choices []byte) {
		g := &generator{rng: rand.New(newByteSource(choices))}
		in := g.input()
		g.admin(&in)
		c := NewCalculator(in)
		s := NewStateOf(in, ipfamily.All...)
		s.Flush()
		stats := map[string]int{}
		for _, fam := range ipfamily.All {
			r := c.Render(fam)
			if got := s.Rendered(fam); !reflect.DeepEqual(got, r) {
				t.Fatalf("%v: a State of the cluster renders\n%+v\nthe Calculator\n%+v\ncluster:%s\nadmin:%s", fam, got, r, g.describe(in), describeAdmin(in))
			}
			k := newKernel(t, r, fam)
			if t.Failed() {
				t.Fatalf("cluster: %s\nadmin: %s", g.describe(in), describeAdmin(in))
			}
			checkGrid(t, 0, g, in, c, k, fam, stats)
			if t.Failed() {
				t.Fatalf("%v: cluster: %s\nadmin: %s", fam, g.describe(in), describeAdmin(in))
			}
		}
	})
}

// byteSource feeds a rand.Rand from the fuzzer's bytes, one byte a draw (repeated over the
// 64 bits, so that IntN and Float64 both see it), then from a generator seeded by them: a
// mutation of a byte changes one choice of the generator.
type byteSource struct {
	data []byte
	rest *rand.PCG
}

func newByteSource(data []byte) *byteSource {
	h := fnv.New64a()
	h.Write(data)
	return &byteSource{data: data, rest: rand.NewPCG(h.Sum64(), uint64(len(data)))}
}

func (s *byteSource) Uint64() uint64 {
	if len(s.data) == 0 {
		return s.rest.Uint64()
	}
	b := s.data[0]
	s.data = s.data[1:]
	return uint64(b) * 0x0101010101010101
}
