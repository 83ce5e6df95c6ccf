package felix

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/model/modeltest"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

var httptestClient = &http.Client{Timeout: 5 * time.Second}

// value reads a gauge or counter.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// histogram reads a histogram's count and sum.
func histogram(h prometheus.Metric) (count uint64, sum float64) {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		return 0, -1
	}
	return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()
}

// The messages felix's tests send, as the node's syncer and BGP speaker will.

func uplink(name string) ipfamily.Pair[string] { return ipfamily.PairOf(name, "") }

// thisNode is node n1's NodeUpdate: its IPv4 BGP address and tunnel address ("" for none).
func thisNode(bgp, tunnel string) model.NodeUpdate { return modeltest.Node("n1", bgp, "", tunnel) }

// localBlock is a block affine to n1.
func localBlock(cidr string) model.BlockUpdate { return modeltest.Block(cidr, "n1") }

var (
	pool      = modeltest.Pool
	workload  = modeltest.Workload
	learned   = modeltest.Learned
	withdrawn = modeltest.Withdrawn
)

func (f *Felix) send(msgs ...any) {
	for _, m := range msgs {
		f.OnUpdate(m)
	}
}

// endpointUpdates are the workload messages that take this node's endpoints from prev to cur,
// as the syncer sends them: a WorkloadRemove for every host veth that went, a WorkloadUpdate for
// every one that came or changed pods.
func endpointUpdates(prev, cur []policy.Endpoint) []any {
	was := map[string]policy.Key{}
	for _, e := range prev {
		was[e.Interface] = e.Pod
	}
	var out []any
	now := map[string]bool{}
	for _, e := range cur {
		now[e.Interface] = true
		if pk, ok := was[e.Interface]; !ok || pk != e.Pod {
			out = append(out, model.WorkloadUpdate{Workload: model.Workload{Pod: e.Pod, Interface: e.Interface}})
		}
	}
	for _, e := range prev {
		if !now[e.Interface] {
			out = append(out, model.WorkloadRemove{Interface: e.Interface})
			now[e.Interface] = true
		}
	}
	return out
}
