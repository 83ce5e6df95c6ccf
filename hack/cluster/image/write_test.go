package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// archive is an image archive read back: its files by name, in order.
type archive struct {
	names []string
	files map[string][]byte
}

func readArchive(t *testing.T, b []byte) archive {
	t.Helper()
	a := archive{files: map[string][]byte{}}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return a
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		if !hdr.ModTime.Equal(epoch) || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("archive entry %s: mtime %v uid %d gid %d", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid)
		}
		a.names = append(a.names, hdr.Name)
		if hdr.Typeflag == tar.TypeReg {
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("read %s: %v", hdr.Name, err)
			}
			a.files[hdr.Name] = body
		}
	}
}

// blob returns the blob d points to after checking that its digest and size match d.
func (a archive) blob(t *testing.T, d Descriptor) []byte {
	t.Helper()
	name := "blobs/sha256/" + strings.TrimPrefix(d.Digest, "sha256:")
	b, ok := a.files[name]
	if !ok {
		t.Fatalf("blob %s (%s) missing; archive has %v", d.Digest, d.MediaType, a.names)
	}
	if got := sha256Hex(b); "sha256:"+got != d.Digest {
		t.Fatalf("blob %s: content digest is sha256:%s", d.Digest, got)
	}
	if int64(len(b)) != d.Size {
		t.Fatalf("blob %s: size %d, descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// layerEntry is one entry of a layer read back.
type layerEntry struct {
	hdr  *tar.Header
	data []byte
}

// parsed is an archive checked end to end: every blob's digest and size, the manifest, the
// config and its diff ID; the layer's entries by path, in order.
type parsed struct {
	index    Index
	manifest Manifest
	config   Config
	order    []string
	layer    map[string]layerEntry
}

func parse(t *testing.T, b []byte) parsed {
	t.Helper()
	a := readArchive(t, b)
	var p parsed
	if got := string(a.files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout: %q", got)
	}
	if err := json.Unmarshal(a.files["index.json"], &p.index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if p.index.SchemaVersion != 2 || p.index.MediaType != MediaTypeIndex || len(p.index.Manifests) != 1 {
		t.Fatalf("index.json: %+v", p.index)
	}
	md := p.index.Manifests[0]
	if md.MediaType != MediaTypeManifest || md.Platform == nil || *md.Platform != (Platform{Architecture: "amd64", OS: "linux"}) {
		t.Fatalf("manifest descriptor: %+v", md)
	}
	if err := json.Unmarshal(a.blob(t, md), &p.manifest); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if p.manifest.SchemaVersion != 2 || p.manifest.MediaType != MediaTypeManifest || p.manifest.Config.MediaType != MediaTypeConfig || len(p.manifest.Layers) != 1 {
		t.Fatalf("manifest: %+v", p.manifest)
	}
	if err := json.Unmarshal(a.blob(t, p.manifest.Config), &p.config); err != nil {
		t.Fatalf("config: %v", err)
	}
	if p.config.OS != "linux" || p.config.Architecture != "amd64" || p.config.RootFS.Type != "layers" || len(p.config.RootFS.DiffIDs) != 1 {
		t.Fatalf("config: %+v", p.config)
	}
	ld := p.manifest.Layers[0]
	layer := a.blob(t, ld)
	switch ld.MediaType {
	case MediaTypeLayer:
	case MediaTypeLayerGzip:
		zr, err := gzip.NewReader(bytes.NewReader(layer))
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		if layer, err = io.ReadAll(zr); err != nil {
			t.Fatalf("layer: %v", err)
		}
	default:
		t.Fatalf("layer media type %q", ld.MediaType)
	}
	if want := "sha256:" + sha256Hex(layer); p.config.RootFS.DiffIDs[0] != want {
		t.Fatalf("diff ID %s, uncompressed layer is %s", p.config.RootFS.DiffIDs[0], want)
	}
	// Nothing but the five expected entries: no stray blob.
	if len(a.names) != 7 || a.names[0] != "oci-layout" || a.names[1] != "index.json" {
		t.Fatalf("archive entries %v", a.names)
	}
	p.layer = map[string]layerEntry{}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("layer %s: %v", hdr.Name, err)
		}
		if !hdr.ModTime.Equal(epoch) || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("layer entry %s: mtime %v owner %d:%d %q:%q", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		name := "/" + strings.TrimSuffix(hdr.Name, "/")
		p.order = append(p.order, name)
		p.layer[name] = layerEntry{hdr, data}
	}
	return p
}

func testImage(t *testing.T) Image {
	t.Helper()
	src := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	return Image{
		Ref: "example.com/team/app:v1.2.3",
		Files: []File{
			Copy("/usr/local/bin/prog", src),
			{Path: "/etc/app/config", Data: []byte("x=1\n")},
			{Path: "/etc/app/secret", Data: []byte("s"), Mode: 0o600},
			Symlink("/usr/bin/prog", "../local/bin/prog"),
			Dir("/tmp", fs.ModeSticky|0o777),
			{Path: "/empty", Data: []byte{}},
		},
		Entrypoint: []string{"/usr/local/bin/prog"},
		Cmd:        []string{"serve"},
		Env:        []string{"PATH=/usr/bin"},
		WorkingDir: "/",
	}
}

func write(t *testing.T, img Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, img); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return b.Bytes()
}

func TestWrite(t *testing.T) {
	for _, gz := range []bool{false, true} {
		img := testImage(t)
		img.Gzip = gz
		p := parse(t, write(t, img))

		if got := p.index.Manifests[0].Annotations; got[AnnotationImageName] != img.Ref || got[AnnotationRefName] != "v1.2.3" {
			t.Errorf("index annotations %v", got)
		}
		c := p.config.Config
		if strings.Join(c.Entrypoint, " ") != "/usr/local/bin/prog" || strings.Join(c.Cmd, " ") != "serve" ||
			strings.Join(c.Env, " ") != "PATH=/usr/bin" || c.WorkingDir != "/" {
			t.Errorf("container config %+v", c)
		}
		wantOrder := []string{"/empty", "/etc", "/etc/app", "/etc/app/config", "/etc/app/secret", "/tmp",
			"/usr", "/usr/bin", "/usr/bin/prog", "/usr/local", "/usr/local/bin", "/usr/local/bin/prog"}
		if strings.Join(p.order, " ") != strings.Join(wantOrder, " ") {
			t.Errorf("layer entries\n got %v\nwant %v", p.order, wantOrder)
		}
		check := func(name string, typ byte, mode int64, data, link string) {
			t.Helper()
			e, ok := p.layer[name]
			if !ok {
				t.Errorf("%s missing", name)
				return
			}
			if e.hdr.Typeflag != typ || e.hdr.Mode != mode || string(e.data) != data || e.hdr.Linkname != link {
				t.Errorf("%s: type %c mode %o data %q link %q; want %c %o %q %q",
					name, e.hdr.Typeflag, e.hdr.Mode, e.data, e.hdr.Linkname, typ, mode, data, link)
			}
		}
		check("/usr/local/bin/prog", tar.TypeReg, 0o750, "#!/bin/sh\necho hi\n", "")
		check("/etc/app/config", tar.TypeReg, 0o644, "x=1\n", "")
		check("/etc/app/secret", tar.TypeReg, 0o600, "s", "")
		check("/empty", tar.TypeReg, 0o644, "", "")
		check("/usr/bin/prog", tar.TypeSymlink, 0o777, "", "../local/bin/prog")
		check("/tmp", tar.TypeDir, 0o1777, "", "")
		check("/usr/local", tar.TypeDir, 0o755, "", "")
	}
}

// The same inputs give the same bytes, whatever the order the files are listed in.
func TestWriteDeterministic(t *testing.T) {
	for _, gz := range []bool{false, true} {
		img := testImage(t)
		img.Gzip = gz
		a := write(t, img)
		rev := img
		rev.Files = nil
		for i := len(img.Files) - 1; i >= 0; i-- {
			rev.Files = append(rev.Files, img.Files[i])
		}
		rev.Files = append(rev.Files, img.Files[0]) // a duplicate is kept once
		if b := write(t, rev); !bytes.Equal(a, b) {
			t.Errorf("gzip=%v: two writes of the same image differ (%d and %d bytes)", gz, len(a), len(b))
		}
		changed := img
		changed.Files = append([]File{}, img.Files...)
		changed.Files[1].Data = []byte("x=2\n")
		if c := write(t, changed); bytes.Equal(a, c) {
			t.Errorf("gzip=%v: a changed file did not change the archive", gz)
		}
	}
}

func TestWriteRejects(t *testing.T) {
	base := func(files ...File) Image { return Image{Ref: "example.com/a:1", Files: files} }
	for name, img := range map[string]Image{
		"relative path":        base(File{Path: "etc/x", Data: []byte("x")}),
		"unclean path":         base(File{Path: "/etc//x", Data: []byte("x")}),
		"root":                 base(Dir("/", 0o755)),
		"conflicting contents": base(File{Path: "/x", Data: []byte("a")}, File{Path: "/x", Data: []byte("b")}),
		"file under symlink":   base(Symlink("/lib", "usr/lib"), File{Path: "/lib/x", Data: []byte("x")}),
		"symlink over dir":     base(File{Path: "/lib/x", Data: []byte("x")}, Symlink("/lib", "usr/lib")),
		"symlink with data":    base(File{Path: "/l", Link: "x", Data: []byte("x")}),
		"src and data":         base(File{Path: "/f", Src: "/etc/hostname", Data: []byte("x")}),
		"missing source":       base(Copy("/f", filepath.Join(t.TempDir(), "nope"))),
		"source is a dir":      base(Copy("/f", t.TempDir())),
		"no tag":               {Ref: "example.com/a"},
		"digest":               {Ref: "example.com/a@sha256:00"},
		"upper case":           {Ref: "example.com/App:1"},
		"port, no tag":         {Ref: "example.com:5000/a"},
	} {
		if err := Write(io.Discard, img); err == nil {
			t.Errorf("%s: Write accepted %+v", name, img)
		}
	}
	// An explicit directory may repeat an implicit one; an identical entry is kept once.
	ok := base(File{Path: "/d/f", Data: []byte("x")}, Dir("/d", 0o700), File{Path: "/d/f", Data: []byte("x")})
	if p := parse(t, write(t, ok)); p.layer["/d"].hdr.Mode != 0o700 || len(p.order) != 2 {
		t.Errorf("explicit directory: %v mode %o", p.order, p.layer["/d"].hdr.Mode)
	}
}
