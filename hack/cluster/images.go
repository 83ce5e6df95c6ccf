package cluster

import (
	"context"
	"path/filepath"

	"github.com/tabbynet/tabby/hack/cluster/images"
)

// The images pods of this cluster run; no registry is reachable, so each is built here and
// imported into every node's containerd.
const (
	PauseImage   = images.PauseRef
	AgnhostImage = images.AgnhostRef
	CoreDNSImage = images.CoreDNSRef
)

// buildImages writes the image archives every node imports: pause (containerd's sandbox image),
// tabby from the lab's binaries under the tag the chart is installed with, CoreDNS, and the e2e
// tests' agnhost and DNS prober.
func (c *Cluster) buildImages(ctx context.Context) ([]string, error) {
	agnhost, err := cacheBinary("agnhost")
	if err != nil {
		return nil, err
	}
	// The version the image's ref names, not whatever the coredns link points to.
	coredns, err := cacheBinary("coredns-" + images.CoreDNSVersion)
	if err != nil {
		return nil, err
	}
	as, err := images.WriteArchives(ctx, images.Options{
		Dir: filepath.Join(c.Lab.Dir, "images"), TabbyBin: c.Lab.TabbyBin, TabbyTag: c.ImageTag,
		Agnhost: agnhost, CoreDNS: coredns, Warn: func(msg string) { c.log.Warn(msg) },
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Path
	}
	return out, nil
}
