package images

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/tabbynet/tabby/hack/cluster/image"
)

// AgnhostTools are the host commands the agnhost image carries besides busybox, as upstream's
// Alpine image does (apk add bind-tools curl netcat-openbsd iproute2 bash; getent is Alpine's
// own): the e2e tests run them in agnhost pods through `/bin/sh -c`. curl and nc (OpenBSD's:
// -u, -v, -z, which busybox's lacks) in the Networking Granular Checks and the Services tests,
// dig and getent in the DNS tests, ss in the NodePort tests.
var AgnhostTools = []string{"curl", "nc", "dig", "nslookup", "getent", "ss", "ip", "bash"}

// Upstream's image defines this user and group for the SupplementalGroups tests; alpine's own
// entries come with them.
const (
	agnhostPasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/:/sbin/nologin\n" +
		"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"
	agnhostGroup = "root:x:0:root\n" +
		"nogroup:x:65534:\n" +
		"user-defined-in-image:x:1000:\n" +
		"group-defined-in-image:x:50000:user-defined-in-image\n"
)

// Agnhost is the e2e test image AgnhostRef: the agnhost binary (built statically from the
// Kubernetes release's test/images/agnhost) at /agnhost, its entrypoint, with `pause` as the
// default argument, and the static coredns at /coredns, as upstream; a toolbox of
// AgnhostTools and busybox (see toolbox). missing names the AgnhostTools this host lacks: the
// image is built without them, and the tests that run them will fail.
func Agnhost(agnhost, coredns string) (img image.Image, missing []string, err error) {
	userland, missing, err := toolbox(AgnhostTools)
	if err != nil {
		return image.Image{}, nil, fmt.Errorf("agnhost image: %w", err)
	}
	certs, err := porterCerts()
	if err != nil {
		return image.Image{}, nil, fmt.Errorf("agnhost image: %w", err)
	}
	files := []image.File{
		{Path: "/agnhost", Src: agnhost, Mode: 0o755},
		// Upstream's image carries CoreDNS too: the DNS tests' own server runs /coredns in it.
		{Path: "/coredns", Src: coredns, Mode: 0o755},
		// porter serves TLS with the cert and key upstream's image holds in its working
		// directory, /: the Proxy tests reach its https ports through the API server.
		{Path: "/localhost.crt", Src: certs[0], Mode: 0o644},
		{Path: "/localhost.key", Src: certs[1], Mode: 0o644},
		// The entrypoint tests override the entrypoint with agnhost-2.
		image.Symlink("/agnhost-2", "agnhost"),
		image.Dir("/uploads", 0o755), // netexec's uploads
		{Path: "/etc/passwd", Data: []byte(agnhostPasswd)},
		{Path: "/etc/group", Data: []byte(agnhostGroup)},
		{Path: "/etc/nsswitch.conf", Data: []byte(nsswitch)},
	}
	return image.Image{
		Ref:        AgnhostRef,
		Files:      append(files, userland...),
		Entrypoint: []string{"/agnhost"},
		Cmd:        []string{"pause"},
		Env:        []string{debianPath},
	}, missing, nil
}

// porterCerts are agnhost porter's TLS certificate and key in the source of Kubernetes
// E2EVersion (the module cache has it: agnhost is built from it).
func porterCerts() ([2]string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+E2EVersion).Output()
	if err != nil {
		return [2]string{}, fmt.Errorf("find the source of k8s.io/kubernetes@%s: %w", E2EVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return [2]string{}, fmt.Errorf("find the source of k8s.io/kubernetes@%s: %v", E2EVersion, err)
	}
	dir := filepath.Join(mod.Dir, "test", "images", "agnhost", "porter")
	return [2]string{filepath.Join(dir, "localhost.crt"), filepath.Join(dir, "localhost.key")}, nil
}
