package images

import (
	"fmt"
	"os"

	"github.com/tabbynet/tabby/hack/cluster/image"
)

// GlibcDNSTestingRef is the second prober of the upstream DNS tests (test/utils/image's
// GlibcDnsTesting in Kubernetes E2EVersion), beside agnhost's: upstream's is Debian with
// dnsutils, so that names are also resolved through glibc (agnhost is Alpine, musl).
const GlibcDNSTestingRef = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0"

// DNSTestingTools are what the DNS tests run in that image through `sh -c`: dig (UDP, TCP,
// SRV and PTR lookups) and glibc's getent (the pod's /etc/hosts entries).
var DNSTestingTools = []string{"dig", "getent"}

// GlibcDNSTesting is the image GlibcDNSTestingRef: the host's dig and getent (glibc, whose
// files and dns lookups are part of libc itself since glibc 2.34), busybox for the rest, and
// coredns at /coredns as upstream's (a test's own DNS server runs it).
func GlibcDNSTesting(coredns string) (img image.Image, missing []string, err error) {
	if _, err := os.Stat(coredns); err != nil {
		return image.Image{}, nil, fmt.Errorf("glibc-dns-testing image: %w (run make cluster-deps)", err)
	}
	userland, missing, err := toolbox(DNSTestingTools)
	if err != nil {
		return image.Image{}, nil, fmt.Errorf("glibc-dns-testing image: %w", err)
	}
	files := []image.File{
		{Path: "/coredns", Src: coredns, Mode: 0o755},
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{Path: "/etc/nsswitch.conf", Data: []byte(nsswitch)},
	}
	return image.Image{
		Ref:   GlibcDNSTestingRef,
		Files: append(files, userland...),
		Cmd:   []string{"sh"},
		Env:   []string{debianPath},
	}, missing, nil
}
