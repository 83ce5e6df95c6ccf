package images

import (
	"github.com/tabbynet/tabby/hack/cluster/image"
)

// ANPAgnhostRef is the agnhost image sigs.k8s.io/network-policy-api's conformance manifests
// run: the same agnhost as AgnhostRef under the tag the suite names.
const ANPAgnhostRef = "registry.k8s.io/e2e-test-images/agnhost:2.45"

// agnhostSCTPWrapper is the image's /agnhost. On a kernel without SCTP (no /proc/net/sctp), a
// porter serving only SCTP ports would exit and its pod never be Ready, so the suite's
// namespaces would never be; it pauses instead. The SCTP tests are skipped on such a kernel.
const agnhostSCTPWrapper = `#!/bin/bash
if [ "$1" = porter ] && [ ! -e /proc/net/sctp ] && ! env | grep -q '^SERVE_\(PORT\|TCP_PORT\|UDP_PORT\|TLS_PORT\)_'; then
	exec /agnhost-bin pause
fi
exec /agnhost-bin "$@"
`

// ANPAgnhost is the image ANPAgnhostRef: Agnhost's files with the agnhost binary at
// /agnhost-bin behind agnhostSCTPWrapper.
func ANPAgnhost(agnhost, coredns string) (image.Image, []string, error) {
	img, missing, err := Agnhost(agnhost, coredns)
	if err != nil {
		return image.Image{}, missing, err
	}
	img.Ref = ANPAgnhostRef
	for i, f := range img.Files {
		if f.Path == "/agnhost" {
			img.Files[i].Path = "/agnhost-bin"
		}
	}
	img.Files = append(img.Files, image.File{Path: "/agnhost", Data: []byte(agnhostSCTPWrapper), Mode: 0o755})
	return img, missing, nil
}
