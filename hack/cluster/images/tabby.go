package images

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/hack/cluster/image"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// TabbyBinaries are the binaries of `make build` the tabby image holds, by image path: the
// agent and CLI, and the CNI plugins install-cni copies to the host (the Dockerfile's layout).
var TabbyBinaries = map[string]string{
	"/usr/local/bin/tabby-node":     "tabby-node",
	"/usr/local/bin/tabbyctl":       "tabbyctl",
	"/usr/local/bin/tabby-typha":    "tabby-typha",
	"/opt/tabby/cni-bin/tabby":      "tabby",
	"/opt/tabby/cni-bin/tabby-ipam": "tabby-ipam",
}

// FelixCommands are the commands felix runs (felix/iptables and felix/ipsets, through
// felix/cmdrun): each family's iptables of each backend with -save and -restore, plain
// `iptables --version` to learn the default backend, and ipset.
func FelixCommands() []string {
	cmds := []string{ipfamily.IPv4.IPTablesCommand(), "ipset"}
	for _, fam := range ipfamily.All {
		for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
			for _, suffix := range []string{"", "-save", "-restore"} {
				cmds = append(cmds, iptables.Command(fam, b, suffix))
			}
		}
	}
	return cmds
}

// defaultBackendBinary is what the plain iptables names run: Debian's default alternative, nft,
// as in the Dockerfile's debian:bookworm-slim. Not the host's /etc/alternatives choice: the
// image must not depend on how this machine is configured.
const defaultBackendBinary = "xtables-nft-multi"

// Tabby is the tabby image of the Dockerfile, ref TabbyRepository:tag: the binaries of binDir
// (`make build`) and the host's iptables (both backends) and ipset with their libraries, the
// iptables extensions and the names felix runs them by.
func Tabby(binDir, tag string) (image.Image, error) {
	var files []image.File
	for _, dst := range slices.Sorted(maps.Keys(TabbyBinaries)) {
		src := filepath.Join(binDir, TabbyBinaries[dst])
		if _, err := os.Stat(src); err != nil {
			return image.Image{}, fmt.Errorf("tabby image: %w (run make build)", err)
		}
		files = append(files, image.File{Path: dst, Src: src, Mode: 0o755})
	}
	tools, err := felixTools()
	if err != nil {
		return image.Image{}, fmt.Errorf("tabby image: %w", err)
	}
	files = append(files, tools...)
	files = append(files, tmpDirs()...)
	// /run for iptables' lock (the chart mounts the host's /run/xtables.lock there), and the
	// /var/run link of Debian through which the chart's /var/run/tabby is mounted.
	files = append(files, image.Dir("/run", 0o755), image.Symlink("/var/run", "/run"))
	return image.Image{
		Ref:        TabbyRepository + ":" + tag,
		Files:      files,
		Entrypoint: []string{"/usr/local/bin/tabby-node"},
		Env:        []string{debianPath},
	}, nil
}

// felixTools returns the files of the commands felix runs, from the host: the iptables
// multi-call binaries and ipset with their libraries, each name felix calls as the host's
// symlink, the extensions iptables loads at run time, and the protocol and service names it
// reads.
func felixTools() ([]image.File, error) {
	var hostPaths, plain []string
	for _, name := range FelixCommands() {
		if name == ipfamily.IPv4.IPTablesCommand() {
			continue // plain names below
		}
		p := findHost(name)
		if p == "" {
			return nil, fmt.Errorf("%s not found in %s (apt-get install iptables ipset)", name, strings.Join(hostBinDirs, ", "))
		}
		hostPaths = append(hostPaths, p)
	}
	for _, fam := range ipfamily.All {
		for _, suffix := range []string{"", "-save", "-restore"} {
			plain = append(plain, fam.IPTablesCommand()+suffix)
		}
	}
	multi := findHost(defaultBackendBinary)
	if multi == "" {
		return nil, fmt.Errorf("%s not found in %s", defaultBackendBinary, strings.Join(hostBinDirs, ", "))
	}
	ext, err := xtablesExtensions(multi)
	if err != nil {
		return nil, err
	}
	hostPaths = append(hostPaths, ext...)
	for _, f := range []string{"/etc/protocols", "/etc/services", "/etc/ethertypes"} {
		if _, err := os.Stat(f); err == nil {
			hostPaths = append(hostPaths, f)
		}
	}
	files, err := image.HostFiles(hostPaths...)
	if err != nil {
		return nil, err
	}
	for _, name := range plain {
		files = append(files, image.Symlink(filepath.Join(filepath.Dir(multi), name), defaultBackendBinary))
	}
	return files, nil
}

// xtablesExtensions returns the iptables extensions (libxt_*.so and the like, dlopen'ed by
// libxtables for every -m and -j): the xtables directory beside the libxtables the iptables
// binary at multi links.
func xtablesExtensions(multi string) ([]string, error) {
	libs, err := image.Libraries(multi)
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		if !strings.HasPrefix(filepath.Base(l), "libxtables.so") {
			continue
		}
		real, err := filepath.EvalSymlinks(l)
		if err != nil {
			return nil, fmt.Errorf("iptables extensions: %w", err)
		}
		dir := filepath.Join(filepath.Dir(real), "xtables")
		ext, err := filepath.Glob(filepath.Join(dir, "*.so"))
		if err != nil || len(ext) == 0 {
			return nil, fmt.Errorf("iptables extensions: none in %s", dir)
		}
		return ext, nil
	}
	return nil, fmt.Errorf("iptables extensions: %s does not link libxtables", multi)
}
