package benchutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/tabbynet/tabby/hack/lab"
)

// MainWithDatastoreLab is the main of a benchmark that runs against a lab whose datastore
// holds made-up pods: the agents' IPAM garbage collection is off (it would collect them). The
// lab is removed when bench returns; an error exits 1, prefixed with "bench name:".
func MainWithDatastoreLab(name string, bench func(context.Context, *lab.Lab) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := func() (err error) {
		l, err := lab.New(ctx, lab.Options{AgentArgs: []string{"--ipam-gc-interval=1h", "--ipam-gc-grace=1h"}})
		if err != nil {
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = errors.Join(err, l.Close(cctx))
		}()
		return bench(ctx, l)
	}()
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", name, err)
		os.Exit(1)
	}
}

// AddHostVeths makes host veths named names in the node's namespace, both ends there (made-up
// pods need the interface their routes and chains name, not a pod behind it).
func AddHostVeths(nodeNS string, names []string) error {
	nsh, err := netns.GetFromPath(lab.NetnsPath(nodeNS))
	if err != nil {
		return err
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return err
	}
	defer h.Close()
	for i, name := range names {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "bp" + strconv.Itoa(i)}
		if err := h.LinkAdd(v); err != nil {
			return fmt.Errorf("add veth %s: %w", name, err)
		}
		if err := h.LinkSetUp(v); err != nil {
			return fmt.Errorf("set veth %s up: %w", name, err)
		}
	}
	return nil
}
