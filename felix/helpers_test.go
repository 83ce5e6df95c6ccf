package felix

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"net/http"
	"time"
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
