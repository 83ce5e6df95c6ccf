package images

import (
	"fmt"
	"os"

	"github.com/tabbynet/tabby/hack/cluster/image"
)

const (
	// CoreDNSVersion is the CoreDNS of kubeadm's DNS add-on in Kubernetes E2EVersion
	// (cmd/kubeadm/app/constants: CoreDNSVersion), and COREDNS_VERSION of
	// hack/controlplane/build.sh, which builds the binary the image holds.
	CoreDNSVersion = "v1.14.2"
	// CoreDNSRef is the image kubeadm deploys for CoreDNSVersion
	// (<repository>/coredns/coredns:<version>).
	CoreDNSRef = "registry.k8s.io/coredns/coredns:" + CoreDNSVersion
)

// CoreDNS is the cluster's DNS server image CoreDNSRef: the static coredns binary at /coredns,
// its entrypoint, as upstream's. Upstream's image runs as a non-root user with a file capability
// to bind port 53; this one runs as root (package image writes neither users nor extended
// attributes), and the pod's capabilities (all dropped but NET_BIND_SERVICE) are what allow
// the bind, so the Deployment's securityContext is the one that matters in both.
func CoreDNS(coredns string) (image.Image, error) {
	if _, err := os.Stat(coredns); err != nil {
		return image.Image{}, fmt.Errorf("coredns image: %w (run make cluster-deps)", err)
	}
	return image.Image{
		Ref:        CoreDNSRef,
		Files:      append([]image.File{{Path: "/coredns", Src: coredns, Mode: 0o755}}, tmpDirs()...),
		Entrypoint: []string{"/coredns"},
	}, nil
}
