package images

import (
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/hack/cluster/image"
)

// nsswitch is for glibc's getent in the test images: the pod's hosts file (kubelet mounts it)
// before DNS, as Debian's default and as musl always does (glibc without the file asks DNS first).
const nsswitch = "passwd: files\ngroup: files\nhosts: files dns\n"

// toolbox is a small userland for a test image: tools (host commands, with the libraries they
// load) and, for every other small command (seq, cat, sleep...), the host's busybox applet, as
// Alpine's busybox upstream; /tmp; /bin/sh is the host's dash, not busybox's ash: Debian's
// busybox runs its own applets before PATH's commands, so its shell would run busybox's nc
// instead of OpenBSD's. missing names the tools this host lacks: the image is built without
// them, and the tests that run them will fail.
func toolbox(tools []string) (files []image.File, missing []string, err error) {
	busybox := findHost("busybox")
	if busybox == "" {
		return nil, nil, fmt.Errorf("no busybox on this host (apt-get install busybox-static)")
	}
	dash := findHost("dash")
	if dash == "" {
		return nil, nil, fmt.Errorf("no dash on this host (apt-get install dash)")
	}
	hostPaths := []string{busybox, dash}
	for _, t := range tools {
		if p := findHost(t); p != "" {
			hostPaths = append(hostPaths, p)
		} else {
			missing = append(missing, t)
		}
	}
	host, err := image.HostFiles(hostPaths...)
	if err != nil {
		return nil, nil, err
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("%s --list: %w", busybox, err)
	}
	files = append(tmpDirs(), host...)
	// A tool of its own wins over busybox's applet of the same name, wherever the tool is.
	provided := map[string]bool{"busybox": true}
	underBin, underSbin := false, false
	for _, f := range host {
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
		return nil, nil, err
	}
	realDash, err := filepath.EvalSymlinks(dash)
	if err != nil {
		return nil, nil, err
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
	return files, missing, nil
}
