package images

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/hack/cluster/image"
)

// AgnhostTools are the host commands the agnhost image carries besides busybox, as upstream's
// Alpine image does (apk add bind-tools curl netcat-openbsd iproute2 bash): the e2e tests run
// them in agnhost pods through `/bin/sh -c`. curl and nc (OpenBSD's: -u, -v, -z, which
// busybox's lacks) in the Networking Granular Checks and the Services tests, dig in the DNS
// tests, ss in the NodePort tests.
var AgnhostTools = []string{"curl", "nc", "dig", "nslookup", "ss", "ip", "bash"}

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
// default argument, as upstream. The small commands (seq, cat, timeout...) are the host's
// busybox applets, as Alpine's busybox upstream; AgnhostTools come from the host with their
// libraries. /bin/sh is the host's dash, not busybox's ash: Debian's busybox runs its own
// applets before PATH's commands, so its shell would run busybox's nc instead of OpenBSD's.
// missing names the AgnhostTools this host lacks: the image is built without them, and the
// tests that run them will fail.
func Agnhost(agnhost string) (img image.Image, missing []string, err error) {
	busybox := findHost("busybox")
	if busybox == "" {
		return image.Image{}, nil, fmt.Errorf("agnhost image: no busybox on this host (apt-get install busybox-static)")
	}
	hostPaths := []string{busybox}
	dash := findHost("dash")
	if dash == "" {
		return image.Image{}, nil, fmt.Errorf("agnhost image: no dash on this host (apt-get install dash)")
	}
	hostPaths = append(hostPaths, dash)
	for _, t := range AgnhostTools {
		if p := findHost(t); p != "" {
			hostPaths = append(hostPaths, p)
		} else {
			missing = append(missing, t)
		}
	}
	tools, err := image.HostFiles(hostPaths...)
	if err != nil {
		return image.Image{}, nil, fmt.Errorf("agnhost image: %w", err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return image.Image{}, nil, fmt.Errorf("agnhost image: %s --list: %w", busybox, err)
	}

	certs, err := porterCerts()
	if err != nil {
		return image.Image{}, nil, fmt.Errorf("agnhost image: %w", err)
	}
	files := []image.File{
		{Path: "/agnhost", Src: agnhost, Mode: 0o755},
		// porter serves TLS with the cert and key upstream's image holds in its working
		// directory, /: the Proxy tests reach its https ports through the API server.
		{Path: "/localhost.crt", Src: certs[0], Mode: 0o644},
		{Path: "/localhost.key", Src: certs[1], Mode: 0o644},
		// The entrypoint tests override the entrypoint with agnhost-2.
		image.Symlink("/agnhost-2", "agnhost"),
		image.Dir("/uploads", 0o755), // netexec's uploads
		{Path: "/etc/passwd", Data: []byte(agnhostPasswd)},
		{Path: "/etc/group", Data: []byte(agnhostGroup)},
	}
	files = append(files, tmpDirs()...)
	files = append(files, tools...)
	// A tool of its own wins over busybox's applet of the same name, wherever the tool is.
	provided := map[string]bool{"busybox": true}
	underBin, underSbin := false, false
	for _, f := range tools {
		switch path.Dir(f.Path) {
		case "/usr/bin", "/usr/sbin", "/bin", "/sbin":
			provided[path.Base(f.Path)] = true
		}
		underBin = underBin || strings.HasPrefix(f.Path, "/bin/")
		underSbin = underSbin || strings.HasPrefix(f.Path, "/sbin/")
	}
	// The applets link to busybox, and sh to dash, in the directories HostFiles copied them to.
	realBusybox, err := filepath.EvalSymlinks(busybox)
	if err != nil {
		return image.Image{}, nil, fmt.Errorf("agnhost image: %w", err)
	}
	realDash, err := filepath.EvalSymlinks(dash)
	if err != nil {
		return image.Image{}, nil, fmt.Errorf("agnhost image: %w", err)
	}
	if !provided["sh"] {
		files = append(files, image.Symlink(filepath.Join(filepath.Dir(realDash), "sh"), filepath.Base(realDash)))
		provided["sh"] = true
	}
	bbDir := filepath.Dir(realBusybox)
	for _, applet := range strings.Fields(string(out)) {
		if !provided[applet] && !strings.Contains(applet, "/") {
			files = append(files, image.Symlink(path.Join(bbDir, applet), "busybox"))
		}
	}
	// /bin/sh is what kubectl exec runs: /bin and /sbin are the merged-/usr links, unless the
	// host's layout put real files there.
	if !underBin {
		files = append(files, image.Symlink("/bin", "usr/bin"))
	}
	if !underSbin {
		files = append(files, image.Symlink("/sbin", "usr/sbin"))
	}
	return image.Image{
		Ref:        AgnhostRef,
		Files:      files,
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
