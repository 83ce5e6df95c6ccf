package felix

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/flowlog"
	"github.com/tabbynet/tabby/felix/metrics"
	"github.com/tabbynet/tabby/felix/netnsrun"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/felix/sysctl"
)

// FlowLog is this node's flow log: what felix recorded while the FelixConfiguration's flowLogs
// were enabled (it keeps the records it closed across a disable), followed as it records.
func (f *Felix) FlowLog() flow.Source { return f.flows.agg }

// flowLogConfig is the FelixConfiguration's flowLogs with the defaults in.
type flowLogConfig struct {
	enabled       bool
	flushInterval time.Duration
	maxRecords    int
}

func flowLogConfigOf(c *v1.FelixConfiguration) flowLogConfig {
	out := flowLogConfig{flushInterval: v1.DefaultFlowLogFlushInterval, maxRecords: v1.DefaultFlowLogMaxRecords}
	if c == nil || c.Spec.FlowLogs == nil {
		return out
	}
	fl := c.Spec.FlowLogs
	out.enabled = fl.Enabled
	if fl.FlushInterval != nil {
		out.flushInterval = min(max(fl.FlushInterval.Duration, v1.MinFlowLogFlushInterval), v1.MaxFlowLogFlushInterval)
	}
	if fl.MaxRecords != nil {
		out.maxRecords = min(max(*fl.MaxRecords, v1.MinFlowLogMaxRecords), v1.MaxFlowLogMaxRecords)
	}
	return out
}

// flowRules is the rules the policy manager's chains log, by log prefix: what it rendered
// last, swapped whole so the capture reads it without a lock.
type flowRules struct {
	p atomic.Pointer[map[string]policy.FlowRule]
}

func (r *flowRules) set(m map[string]policy.FlowRule) { r.p.Store(&m) }

func (r *flowRules) get(prefix string) (policy.FlowRule, bool) {
	m := r.p.Load()
	if m == nil {
		return policy.FlowRule{}, false
	}
	fr, ok := (*m)[prefix]
	return fr, ok
}

// flowLogManager runs the flow log's capture while the FelixConfiguration enables it: conntrack
// accounting on (a sysctl of felix's namespace), the NFLOG and conntrack subscriptions, the
// joiner. Disabled, it holds nothing but the records already closed. It knows every pod's
// addresses (the IPAM messages the policy manager gets) to name a flow's ends.
type flowLogManager struct {
	node   string
	run    netnsrun.Runner
	sysctl SysctlWriter
	log    *slog.Logger
	agg    *flowlog.Aggregator
	rules  *flowRules
	count  flowlog.Counters

	// acctSet: conntrack accounting was off and flow logs turned it on.
	acctSet bool

	want    flowLogConfig
	running flowLogConfig
	capture *flowlog.Capture

	podsMu sync.RWMutex
	pods   map[netip.Addr]policy.Key
	// workloads are this node's pods' addresses by host interface; local is their union.
	workloads map[string][]netip.Addr
	local     map[netip.Addr]bool
	// haveIPAM: the whole map has arrived (PodIPsUpdate); a delta before it means nothing.
	haveIPAM bool
}

func newFlowLogManager(node string, run netnsrun.Runner, sc SysctlWriter, m *metrics.Metrics, rules *flowRules, log *slog.Logger) *flowLogManager {
	c := flowlog.Counters{Records: m.FlowRecords, Dropped: m.FlowRecordsDropped, Connections: m.FlowConnections}
	// Present at zero, so a dashboard's rate has a series before the first drop or connection.
	for _, reason := range []string{flowlog.DropCap, flowlog.DropSubscriber, flowlog.DropConnections} {
		m.FlowRecordsDropped.WithLabelValues(reason)
	}
	for _, v := range []flow.Verdict{flow.Allow, flow.Deny} {
		m.FlowConnections.WithLabelValues(string(v))
	}
	return &flowLogManager{
		node: node, run: run, sysctl: sc, log: log, rules: rules, count: c,
		agg:  flowlog.NewAggregator(node, v1.DefaultFlowLogMaxRecords, c),
		want: flowLogConfigOf(nil), pods: map[netip.Addr]policy.Key{},
		workloads: map[string][]netip.Addr{}, local: map[netip.Addr]bool{},
	}
}

func (m *flowLogManager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case model.FelixConfigurationUpdate:
		m.want = flowLogConfigOf(u.Config)
	case PodIPsUpdate:
		m.podsMu.Lock()
		clear(m.pods)
		for k, ips := range u.IPs {
			for _, ip := range ips {
				m.pods[ip] = k
			}
		}
		m.haveIPAM = true
		m.podsMu.Unlock()
	case model.WorkloadUpdate:
		m.setWorkload(u.Workload.Interface, u.Workload.IPs)
	case model.WorkloadRemove:
		m.setWorkload(u.Interface, nil)
	case PodIPsDelta:
		m.podsMu.Lock()
		if m.haveIPAM {
			for _, a := range u.Removed {
				if m.pods[a.IP] == a.Pod {
					delete(m.pods, a.IP)
				}
			}
			for _, a := range u.Added {
				m.pods[a.IP] = a.Pod
			}
		}
		m.podsMu.Unlock()
	}
}

// CompleteDeferredWork starts, stops or restarts the capture as the configuration says; a
// capture whose reader failed is started again.
func (m *flowLogManager) CompleteDeferredWork(_ context.Context, resync bool) error {
	if m.capture != nil {
		select {
		case <-m.capture.Done():
			m.capture = nil
		default:
		}
	}
	if m.want == m.running && (m.capture != nil) == m.want.enabled && !(resync && m.want.enabled) {
		return nil
	}
	m.agg.SetMaxRecords(m.want.maxRecords)
	if !m.want.enabled {
		m.stop()
		m.running = m.want
		return m.setAccounting(false)
	}
	// Accounting counts each connection's packets and bytes; it is the namespace's setting, set
	// again at each resync like felix's other sysctls.
	if err := m.setAccounting(true); err != nil {
		return err
	}
	if m.capture != nil && m.want == m.running {
		return nil
	}
	m.stop()
	j := flowlog.NewJoiner(m.agg, m, 8*m.want.maxRecords, m.count)
	c, err := flowlog.StartCapture(flowlog.Opener(m.run), j, m.agg, m.want.flushInterval, m.log)
	if err != nil {
		return fmt.Errorf("flow logs: %w", err)
	}
	m.capture, m.running = c, m.want
	m.log.Info("flow logs on", "flushInterval", m.want.flushInterval, "maxRecords", m.want.maxRecords)
	return nil
}

// setAccounting turns conntrack accounting on, or back off if flow logs turned it on (a host
// that had it on keeps it).
func (m *flowLogManager) setAccounting(on bool) error {
	if on == m.acctSet {
		if on {
			return m.sysctl.Set(sysctl.ConntrackAccounting()...)
		}
		return nil
	}
	s := sysctl.ConntrackAccounting()
	if on {
		if g, ok := m.sysctl.(interface{ Get(string) (string, error) }); ok {
			if v, err := g.Get(s[0].Key); err == nil && strings.TrimSpace(v) == s[0].Value {
				return nil // already on: not flow logs' to turn off
			}
		}
	} else {
		s[0].Value = "0"
	}
	if err := m.sysctl.Set(s...); err != nil {
		return fmt.Errorf("flow logs: conntrack accounting %v: %w", on, err)
	}
	m.acctSet = on
	return nil
}

// stop ends the capture; the next pass starts it again if flow logs are still on.
func (m *flowLogManager) stop() {
	if m.capture == nil {
		return
	}
	m.capture.Stop()
	m.capture, m.running = nil, flowLogConfig{}
	m.log.Info("flow log capture stopped")
}

// Rule implements flowlog.Resolver.
func (m *flowLogManager) Rule(prefix string) (flowlog.Rule, bool) {
	fr, ok := m.rules.get(prefix)
	if !ok {
		return flowlog.Rule{}, false
	}
	return flowlog.Rule{Verdict: flow.Verdict(fr.Verdict), Direction: fr.Direction, Text: fr.Text}, true
}

// setWorkload records a local pod's addresses (none: it left).
func (m *flowLogManager) setWorkload(iface string, ips []netip.Addr) {
	m.podsMu.Lock()
	defer m.podsMu.Unlock()
	if ips == nil {
		delete(m.workloads, iface)
	} else {
		m.workloads[iface] = ips
	}
	clear(m.local)
	for _, ips := range m.workloads {
		for _, ip := range ips {
			m.local[ip.Unmap()] = true
		}
	}
}

// Local implements flowlog.Resolver.
func (m *flowLogManager) Local(ip netip.Addr) bool {
	m.podsMu.RLock()
	defer m.podsMu.RUnlock()
	return m.local[ip.Unmap()]
}

// Pod implements flowlog.Resolver.
func (m *flowLogManager) Pod(ip netip.Addr) (string, string, bool) {
	m.podsMu.RLock()
	k, ok := m.pods[ip.Unmap()]
	m.podsMu.RUnlock()
	return k.Namespace, k.Name, ok
}
