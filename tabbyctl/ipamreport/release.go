package ipamreport

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/ipam"
)

// ErrInUse is returned when a live Pod still uses the address and force is off.
type ErrInUse struct {
	IP   netip.Addr
	Pods []string
}

func (e *ErrInUse) Error() string {
	return fmt.Sprintf("%s is in use by live pod %v: refusing to release it (a second pod would get the same address); use --force if you are sure", e.IP, e.Pods)
}

// Release frees one address: the block's allocation goes, and its handle's count drops (the
// handle goes with its last address). Unless force is set it refuses an address a live Pod uses.
func Release(ctx context.Context, c *client.Client, ip netip.Addr, force bool) (Holder, error) {
	d, err := Load(ctx, c)
	if err != nil {
		return Holder{}, err
	}
	h := Lookup(d, ip)
	if !h.Allocated {
		return h, fmt.Errorf("release %s: %s", ip, h.String())
	}
	if !force {
		var users []string
		for _, p := range LivePodsWithIP(d, ip) {
			users = append(users, p.Namespace+"/"+p.Name)
		}
		if h.Pod != "" && len(users) == 0 {
			if p, err := c.Kube.CoreV1().Pods(h.Namespace).Get(ctx, h.Pod, metav1.GetOptions{}); err == nil && podLive(p) {
				if ips := podIPs(p); len(ips) == 0 || containsAddr(ips, ip) {
					users = append(users, h.Namespace+"/"+h.Pod)
				}
			} else if err != nil && !apierrors.IsNotFound(err) {
				return h, fmt.Errorf("release %s: check pod %s/%s: %w", ip, h.Namespace, h.Pod, err)
			}
		}
		if len(users) > 0 {
			return h, &ErrInUse{IP: ip, Pods: users}
		}
	}
	// The write is the IPAM library's: the same compare-and-swap sequence (block first, then the
	// handle) tabby-node and the CNI plugin use, so a concurrent ADD/DEL is never overwritten.
	alloc := ipam.New(ipam.NewKubeStore(c), ipam.Config{Logger: slog.New(slog.DiscardHandler)})
	if err := alloc.ReleaseIP(ctx, ip); err != nil {
		return h, err
	}
	return h, nil
}
