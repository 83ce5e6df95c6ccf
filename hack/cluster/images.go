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
)

// buildImages writes the image archives every node imports: pause (containerd's sandbox image),
// tabby from the lab's binaries under the tag the chart is installed with, and agnhost.
func (c *Cluster) buildImages(ctx context.Context) ([]string, error) {
	agnhost, err := cacheBinary("agnhost")
	if err != nil {
		return nil, err
	}
	as, err := images.WriteArchives(ctx, images.Options{
		Dir: filepath.Join(c.Lab.Dir, "images"), TabbyBin: c.Lab.TabbyBin, TabbyTag: c.ImageTag,
		Agnhost: agnhost, Warn: func(msg string) { c.log.Warn(msg) },
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
