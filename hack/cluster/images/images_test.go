package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tabbynet/tabby/hack/cluster/image"
	"github.com/tabbynet/tabby/internal/testenv"
)

// unpack writes img's archive and unpacks its layer into a new directory, which it returns.
func unpack(t *testing.T, img image.Image) string {
	t.Helper()
	var b bytes.Buffer
	if err := image.Write(&b, img); err != nil {
		t.Fatalf("write %s: %v", img.Ref, err)
	}
	blobs := map[string][]byte{}
	tr := tar.NewReader(&b)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		blobs[hdr.Name] = body
	}
	var idx image.Index
	var m image.Manifest
	blob := func(d image.Descriptor) []byte { return blobs["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")] }
	if err := json.Unmarshal(blobs["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, blobs["index.json"])
	}
	if err := json.Unmarshal(blob(idx.Manifests[0]), &m); err != nil || len(m.Layers) != 1 || m.Layers[0].MediaType != image.MediaTypeLayer {
		t.Fatalf("manifest: %v %+v", err, m)
	}
	root := t.TempDir()
	lr := tar.NewReader(bytes.NewReader(blob(m.Layers[0])))
	for {
		hdr, err := lr.Next()
		if err == io.EOF {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, hdr.Name)
		mode := os.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.Mkdir(dst, mode)
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, dst)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode); err == nil {
				_, err = io.Copy(f, lr)
				f.Close()
			}
		default:
			t.Fatalf("%s: unexpected type %c", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// inRoot runs a shell command chrooted in root, in a network namespace of its own so that
// nothing it does reaches the host's firewall, and returns its output.
func inRoot(t *testing.T, root string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Cloneflags: syscall.CLONE_NEWNET}
	cmd.Dir = "/"
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chroot and network namespaces need root")
	}
}

func fakeBinDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, name := range TabbyBinaries {
		if err := os.WriteFile(filepath.Join(d, name), []byte("#!/bin/sh\necho "+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestFelixCommands(t *testing.T) {
	cmds := FelixCommands()
	for _, want := range []string{"iptables", "ipset", "iptables-nft", "iptables-nft-save", "iptables-nft-restore",
		"iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore", "ip6tables-nft-restore", "ip6tables-legacy-save"} {
		if !slices.Contains(cmds, want) {
			t.Errorf("FelixCommands() lacks %s: %v", want, cmds)
		}
	}
	if len(cmds) != 14 {
		t.Errorf("FelixCommands() = %d names, want 14: %v", len(cmds), cmds)
	}
}

func TestTabby(t *testing.T) {
	if findHost("xtables-nft-multi") == "" || findHost("ipset") == "" {
		t.Skip("iptables or ipset not on this host")
	}
	img, err := Tabby(fakeBinDir(t), "v1.2.3-4-gabcdef")
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != "ghcr.io/tabbynet/tabby:v1.2.3-4-gabcdef" || strings.Join(img.Entrypoint, " ") != "/usr/local/bin/tabby-node" {
		t.Errorf("ref %s entrypoint %v", img.Ref, img.Entrypoint)
	}
	if _, err := Tabby(t.TempDir(), "x"); err == nil {
		t.Error("Tabby without binaries succeeded")
	}
	needRoot(t)
	root := unpack(t, img)
	for dst, name := range TabbyBinaries {
		if b, err := os.ReadFile(filepath.Join(root, dst)); err != nil || !strings.Contains(string(b), name) {
			t.Errorf("%s: %v %q", dst, err, b)
		}
	}
	env := img.Env
	// The image has no shell: a static busybox copied in runs the commands.
	bb := findHost("busybox")
	if bb == "" {
		t.Skip("no busybox to run commands in the image with")
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	// Every command felix runs, by the name it runs it, through the image's PATH.
	for _, name := range FelixCommands() {
		arg := "--version"
		if strings.HasSuffix(name, "-restore") {
			arg = "--help" // iptables-restore has no --version before 1.8.10
		}
		out, err := inRoot(t, root, env, "/busybox", "env", name, arg)
		if err != nil && !strings.Contains(out, "Usage") {
			t.Errorf("%s %s in the image: %v: %s", name, arg, err, out)
		}
	}
	if out, _ := inRoot(t, root, env, "/usr/sbin/iptables", "--version"); !strings.Contains(out, "nf_tables") {
		t.Errorf("iptables --version: %q, want the nft backend", out)
	}
	// The extensions load: a ruleset like felix's, with sets, comments, marks and NAT, in a
	// network namespace of the test's own, on both backends.
	const rules = `*nat
:TEST-NAT - [0:0]
-A TEST-NAT -m set --match-set test-set src -m comment --comment "tabby test" -j MASQUERADE --random-fully
COMMIT
*filter
:TEST-FILTER - [0:0]
-A TEST-FILTER -m conntrack --ctstate INVALID -j DROP
-A TEST-FILTER -m mark --mark 0x10000/0x10000 -m addrtype --dst-type LOCAL -j ACCEPT
-A TEST-FILTER -p tcp -m multiport --dports 80,443 -j RETURN
COMMIT
`
	for _, b := range []string{"nft", "legacy"} {
		script := "ipset create test-set hash:net && ipset add test-set 10.0.0.0/8 && ipset save && " +
			"iptables-" + b + "-restore --noflush -w 5 <<'EOF'\n" + rules + "EOF\n" +
			"iptables-" + b + "-save -t nat"
		out, err := inRoot(t, root, env, "/busybox", "sh", "-c", script)
		if err != nil || !strings.Contains(out, "--match-set test-set src") || !strings.Contains(out, "--random-fully") {
			t.Errorf("%s backend: %v\n%s", b, err, out)
		}
	}
}

func TestPause(t *testing.T) {
	bin, err := BuildPause(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img := Pause(bin)
	if img.Ref != PauseRef || strings.Join(img.Entrypoint, " ") != "/pause" {
		t.Errorf("%+v", img)
	}
	needRoot(t)
	root := unpack(t, img)
	// Static: it runs in a root with nothing else.
	if out, err := inRoot(t, root, nil, "/pause", "-v"); err != nil || !strings.Contains(out, "pause") {
		t.Errorf("/pause -v: %v %q", err, out)
	}
}

func TestAgnhost(t *testing.T) {
	if findHost("busybox") == "" {
		t.Skip("no busybox on this host")
	}
	fake := filepath.Join(t.TempDir(), "agnhost")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho agnhost \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, missing, err := Agnhost(fake, fake)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != AgnhostRef || strings.Join(img.Entrypoint, " ") != "/agnhost" || strings.Join(img.Cmd, " ") != "pause" {
		t.Errorf("ref %s entrypoint %v cmd %v", img.Ref, img.Entrypoint, img.Cmd)
	}
	needRoot(t)
	root := unpack(t, img)
	env := img.Env
	if out, err := inRoot(t, root, env, "/agnhost-2", "netexec"); err != nil || out != "agnhost netexec\n" {
		t.Errorf("/agnhost-2 netexec: %v %q", err, out)
	}
	// porter's TLS ports (the Proxy tests) need the cert and key in the working directory.
	if out, err := inRoot(t, root, env, "/bin/sh", "-c", "grep -c 'BEGIN CERTIFICATE' /localhost.crt && grep -c 'PRIVATE KEY-----' /localhost.key"); err != nil || out != "1\n2\n" {
		t.Errorf("porter's certificate and key: %v %q", err, out)
	}
	// What e2e runs through kubectl exec: /bin/sh -c with busybox's commands.
	if out, err := inRoot(t, root, env, "/bin/sh", "-c", "for i in $(seq 1 3); do echo -n $i; done; test -d /uploads && cat /etc/group | grep -c group-defined-in-image"); err != nil || out != "1231\n" {
		t.Errorf("/bin/sh: %v %q", err, out)
	}
	// Each tool, run the way e2e runs it (a /bin/sh -c command line), is the host's and not a
	// busybox applet of the same name: its first line of output is the host's.
	checks := map[string]string{
		"curl":     "curl --version",
		"nc":       "nc -h",
		"dig":      "dig -v",
		"nslookup": "nslookup -version",
		"getent":   "getent group root | cut -d: -f1,3",
		"ss":       "ss -V",
		"ip":       "ip -V 2>&1 | grep utility | cut -d, -f1-2", // its libbpf line needs /proc
		"bash":     "bash --version",
	}
	firstLine := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }
	for _, tool := range AgnhostTools {
		if slices.Contains(missing, tool) {
			t.Logf("%s not on this host: not in the image", tool)
			continue
		}
		host, _ := exec.Command("/bin/sh", "-c", checks[tool]+" 2>&1").Output()
		out, err := inRoot(t, root, env, "/bin/sh", "-c", checks[tool]+" 2>&1")
		if firstLine(out) != firstLine(string(host)) || strings.Contains(out, "error while loading") {
			t.Errorf("%s in the image: %v: %q, on the host %q", checks[tool], err, out, host)
		}
	}
}

// The DNS prober image runs the upstream DNS tests' probe lines: dig from the host, getent
// reading the hosts file through glibc (kubelet mounts the pod's), busybox's seq and test.
func TestGlibcDNSTesting(t *testing.T) {
	if findHost("busybox") == "" {
		t.Skip("no busybox on this host")
	}
	fake := filepath.Join(t.TempDir(), "coredns")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho coredns \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := GlibcDNSTesting(filepath.Join(t.TempDir(), "coredns")); err == nil {
		t.Error("GlibcDNSTesting without coredns succeeded")
	}
	img, missing, err := GlibcDNSTesting(fake)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Skipf("this host lacks %v", missing)
	}
	needRoot(t)
	root := unpack(t, img)
	if err := os.WriteFile(filepath.Join(root, "etc", "hosts"), []byte("10.244.1.7\tdns-querier-1.dns-test-service.ns.svc.cluster.local dns-querier-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := `for i in $(seq 1 2); do test -n "$(getent hosts dns-querier-1)" && echo OK > /tmp/hosts; done; cat /tmp/hosts; getent hosts dns-querier-1.dns-test-service.ns.svc.cluster.local; dig -v 2>&1 | cut -d' ' -f1; /coredns -version`
	want := "OK\n10.244.1.7      dns-querier-1.dns-test-service.ns.svc.cluster.local dns-querier-1\nDiG\ncoredns -version\n"
	if out, err := inRoot(t, root, img.Env, "/bin/sh", "-c", probe); err != nil || out != want {
		t.Errorf("probe: %v\n%s\nwant\n%s", err, out, want)
	}
}

func TestCoreDNS(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "coredns")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho coredns \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := CoreDNS(fake)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != "registry.k8s.io/coredns/coredns:"+CoreDNSVersion || strings.Join(img.Entrypoint, " ") != "/coredns" {
		t.Errorf("ref %s entrypoint %v", img.Ref, img.Entrypoint)
	}
	if _, err := CoreDNS(filepath.Join(t.TempDir(), "coredns")); err == nil {
		t.Error("CoreDNS without the binary succeeded")
	}
	needRoot(t)
	root := unpack(t, img)
	if b, err := os.ReadFile(filepath.Join(root, "coredns")); err != nil || !strings.Contains(string(b), "echo coredns") {
		t.Errorf("/coredns: %v %q", err, b)
	}
	// The binary build.sh caches, if there: static, it runs in a root with nothing else.
	built := filepath.Join(testenv.BinDir(), "coredns-"+CoreDNSVersion)
	if _, err := os.Stat(built); err != nil {
		t.Skipf("not run: %v (make cluster-deps)", err)
	}
	if img, err = CoreDNS(built); err != nil {
		t.Fatal(err)
	}
	root = unpack(t, img)
	if out, err := inRoot(t, root, nil, "/coredns", "-version"); err != nil || !strings.Contains(out, "CoreDNS-"+strings.TrimPrefix(CoreDNSVersion, "v")) {
		t.Errorf("/coredns -version: %v %q", err, out)
	}
}

// The refs match their sources: the chart's default repository, the CoreDNS build.sh builds,
// and, when the module cache has them, what containerd v2.4.2, the e2e tests and kubeadm of
// E2EVersion expect.
func TestRefs(t *testing.T) {
	b, err := os.ReadFile("../../../charts/tabby/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Image struct{ Repository string } `json:"image"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Repository != TabbyRepository {
		t.Errorf("chart's image.repository %q, TabbyRepository %q", values.Image.Repository, TabbyRepository)
	}

	build, err := os.ReadFile("../../controlplane/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(build), "COREDNS_VERSION=${COREDNS_VERSION:-"+CoreDNSVersion+"}") {
		t.Errorf("build.sh's default COREDNS_VERSION is not %s", CoreDNSVersion)
	}

	modCache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := strings.TrimSpace(string(modCache))
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(cache, p))
		if err != nil {
			t.Logf("not checked against %s: %v", p, err)
			return ""
		}
		return string(b)
	}
	if src := read("k8s.io/kubernetes@" + E2EVersion + "/test/utils/image/manifest.go"); src != "" {
		for ref, id := range map[string]string{AgnhostRef: "Agnhost", PauseRef: "Pause", GlibcDNSTestingRef: "GlibcDnsTesting"} {
			m := regexp.MustCompile(`configs\[` + id + `\] = Config\{list\.\w+, "([^"]+)", "([^"]+)"\}`).FindStringSubmatch(src)
			if m == nil || !strings.HasSuffix(ref, "/"+m[1]+":"+m[2]) {
				t.Errorf("e2e %s's %s image is %v, we build %s", E2EVersion, id, m, ref)
			}
		}
	}
	if src := read("k8s.io/kubernetes@" + E2EVersion + "/cmd/kubeadm/app/constants/constants.go"); src != "" {
		if !strings.Contains(src, `CoreDNSVersion = "`+CoreDNSVersion+`"`) {
			t.Errorf("kubeadm %s's CoreDNSVersion is not %s", E2EVersion, CoreDNSVersion)
		}
	}
	if src := read("github.com/containerd/containerd/v2@v2.4.2/internal/cri/config/config.go"); src != "" {
		if !strings.Contains(src, `DefaultSandboxImage = "`+PauseRef+`"`) {
			t.Errorf("containerd v2.4.2's DefaultSandboxImage is not %s", PauseRef)
		}
	}
}

// The suite's agnhost runs agnhost as the base image does, but a porter serving only SCTP
// pauses when the kernel has no SCTP (else it exits and its pod is never Ready).
func TestANPAgnhost(t *testing.T) {
	if findHost("busybox") == "" {
		t.Skip("no busybox on this host")
	}
	fake := filepath.Join(t.TempDir(), "agnhost")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho agnhost \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, _, err := ANPAgnhost(fake, fake)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != ANPAgnhostRef || strings.Join(img.Entrypoint, " ") != "/agnhost" {
		t.Errorf("ref %s entrypoint %v", img.Ref, img.Entrypoint)
	}
	needRoot(t)
	root := unpack(t, img)
	if out, err := inRoot(t, root, img.Env, "/agnhost", "connect", "--protocol=tcp", "10.244.0.5:80"); err != nil || out != "agnhost connect --protocol=tcp 10.244.0.5:80\n" {
		t.Errorf("/agnhost connect: %v %q", err, out)
	}
	// This root has no /proc/net/sctp, as a kernel without SCTP.
	wantSCTP := "agnhost pause\n"
	if out, err := inRoot(t, root, append(img.Env, "SERVE_SCTP_PORT_9003=foo"), "/bin/bash", "-c", "/agnhost porter"); err != nil || out != wantSCTP {
		t.Errorf("porter of SCTP: %v %q, want %q", err, out, wantSCTP)
	}
	if out, err := inRoot(t, root, append(img.Env, "SERVE_SCTP_PORT_9003=foo", "SERVE_TCP_PORT_80=foo"), "/agnhost", "porter"); err != nil || out != "agnhost porter\n" {
		t.Errorf("porter of TCP and SCTP: %v %q", err, out)
	}
}
