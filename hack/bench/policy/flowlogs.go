package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
)

// flowLogRates measures the packet path with flow logs on and off, window by window in turn
// (alternatingRates): every new connection is then logged by NFLOG on node-1 (whose chains
// police the server) and followed through conntrack by both felixes. It leaves flow logs off
// and says what each node's flow log counted.
func (w *world) flowLogRates(ctx context.Context) (on, off float64, counts string, err error) {
	if err := w.setFlowLogs(ctx, true); err != nil {
		return 0, 0, "", err
	}
	on, off, err = w.alternatingRates(ctx, func(first bool) error { return w.setFlowLogs(ctx, first) })
	if err != nil {
		return 0, 0, "", err
	}
	var parts []string
	for _, n := range []*lab.Node{w.n1, w.client.Node} {
		m, err := n.Metrics(ctx)
		if err != nil {
			return 0, 0, "", err
		}
		var got []string
		for _, line := range strings.Split(m, "\n") {
			if strings.HasPrefix(line, "tabby_felix_flow_records") {
				got = append(got, line)
			}
		}
		parts = append(parts, n.Name+": "+strings.Join(got, ", "))
	}
	return on, off, strings.Join(parts, "; "), w.setFlowLogs(ctx, false)
}

// setFlowLogs writes the FelixConfiguration's flowLogs.enabled and waits until both nodes'
// chains are what the policies and it call for (NFLOG rules or none).
func (w *world) setFlowLogs(ctx context.Context, on bool) error {
	fcs := w.l.Client.FelixConfigurations()
	fc, err := fcs.Get(ctx, v1.DefaultFelixConfigurationName)
	if apierrors.IsNotFound(err) {
		fc = &v1.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultFelixConfigurationName}}
		fc.Spec.FlowLogs = &v1.FlowLogsSpec{Enabled: on}
		_, err = fcs.Create(ctx, fc)
	} else if err == nil {
		fc.Spec.FlowLogs = &v1.FlowLogsSpec{Enabled: on}
		_, err = fcs.Update(ctx, fc)
	}
	if err != nil {
		return fmt.Errorf("flow logs %v: %w", on, err)
	}
	// node-1 polices the server (its chains log); node-2's client is selected by no policy,
	// so its chains are the same either way and only its capture changes.
	err = lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
		save, err := w.n1.Exec(ctx, "iptables-save", "-t", "filter")
		if err != nil {
			return err
		}
		if strings.Contains(save, "-j NFLOG") != on {
			return fmt.Errorf("%s: NFLOG rules present: %v, want %v", w.n1.Name, !on, on)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, n := range []*lab.Node{w.n1, w.client.Node} {
		if err := w.waitMatches(ctx, n); err != nil {
			return err
		}
	}
	return nil
}
