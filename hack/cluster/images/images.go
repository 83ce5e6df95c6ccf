// Package images defines the container images a tabby cluster on this machine needs and has no
// registry to pull from: the pod sandbox (pause), tabby itself, the DNS server (CoreDNS) and the
// e2e test image agnhost.
// Each is built from binaries on this machine with package image.
package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/tabbynet/tabby/hack/cluster/image"
)

const (
	// PauseRef is both containerd 2.4.2's default sandbox image (the CRI plugin's
	// pinned_images.sandbox) and the pause image of the e2e tests of Kubernetes v1.36.3
	// (imageutils.Pause): containerd needs no configuration for it and the tests that run
	// pause pods find it.
	PauseRef = "registry.k8s.io/pause:3.10.2"
	// AgnhostRef is the agnhost image the e2e tests of Kubernetes E2EVersion run
	// (test/utils/image/manifest.go, imageutils.Agnhost).
	AgnhostRef = "registry.k8s.io/e2e-test-images/agnhost:2.63.0"
	// E2EVersion is the Kubernetes release whose e2e tests AgnhostRef and PauseRef match.
	E2EVersion = "v1.36.3"
	// TabbyRepository is the chart's default image.repository (charts/tabby/values.yaml).
	TabbyRepository = "ghcr.io/tabbynet/tabby"
)

// The module path of the pause command, built by BuildPause.
const pausePackage = "github.com/tabbynet/tabby/hack/cluster/pause"

// BuildPause builds the pause command, static, into dir and returns the binary's path. It runs
// the go command, so the working directory must be inside the lab's module (hack/).
func BuildPause(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pausePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pausePackage, err, out)
	}
	return bin, nil
}

// Pause is the sandbox image: the static pause binary at /pause, its entrypoint, as in
// Kubernetes' own image.
func Pause(pauseBin string) image.Image {
	return image.Image{
		Ref:        PauseRef,
		Files:      []image.File{{Path: "/pause", Src: pauseBin, Mode: 0o755}},
		Entrypoint: []string{"/pause"},
	}
}

// debianPath is the PATH of Debian's images.
const debianPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostBinDirs is where host commands are looked for, in this order.
var hostBinDirs = []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// findHost returns the host path of command name, or "" if no hostBinDirs holds it.
func findHost(name string) string {
	for _, d := range hostBinDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// tmpDirs are the writable directories every image has.
func tmpDirs() []image.File {
	return []image.File{image.Dir("/tmp", os.ModeSticky|0o777)}
}
