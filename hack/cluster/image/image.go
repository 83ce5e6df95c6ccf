// Package image writes container images as OCI image-layout tar archives, built from files on
// this machine instead of from a Dockerfile: the cluster's nodes have no registry to pull from
// and no image builder, only containerd, which imports such an archive with
// `ctr -n k8s.io images import`.
//
// An image is one layer holding the listed files. The output is a pure function of the inputs
// (fixed timestamps, owner root, entries in path order), so the same files give the same
// digests and importing a rebuilt, unchanged image again changes nothing.
package image

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Image is a single-layer linux/amd64 image.
type Image struct {
	// Ref is the full reference the image is known by, with a tag:
	// "registry.k8s.io/pause:3.10.2", "ghcr.io/tabbynet/tabby:v0.3.0".
	Ref   string
	Files []File
	// Entrypoint, Cmd, Env and WorkingDir are the image config's defaults, as in a Dockerfile.
	Entrypoint, Cmd, Env []string
	WorkingDir           string
	// Gzip compresses the layer. Off by default: the archive is imported on this machine, where
	// compressing costs more time than moving the bytes.
	Gzip bool
}

// File is one entry of the image's file system. Exactly one of Src, Data (possibly empty) or
// Link gives the content, or Mode has fs.ModeDir for a directory. Directories a path needs but
// no File lists are created with mode 0755.
type File struct {
	// Path is absolute and clean: "/usr/local/bin/tabby-node".
	Path string
	// Mode is the permission bits (with setuid, setgid or sticky when wanted) and, for a
	// directory, fs.ModeDir. Zero permission bits mean the host file's for Src, 0644 for Data
	// and 0755 for a directory. Ignored for a symlink.
	Mode fs.FileMode
	// Src is a regular host file whose content is copied.
	Src string
	// Data is the content when Src and Link are empty.
	Data []byte
	// Link makes the entry a symbolic link to this target, relative or absolute, resolved in
	// the image as on a host.
	Link string
}

// Dir is a directory entry with the given permission bits.
func Dir(p string, perm fs.FileMode) File { return File{Path: p, Mode: fs.ModeDir | perm} }

// Symlink is a symbolic link at p pointing to target.
func Symlink(p, target string) File { return File{Path: p, Link: target} }

// Copy is the host file src at p in the image, with src's permissions.
func Copy(p, src string) File { return File{Path: p, Src: src} }

type kind int

const (
	kindFile kind = iota
	kindDir
	kindLink
)

// entry is a File after validation, with its kind and final mode; implicit marks a parent
// directory no File listed.
type entry struct {
	File
	kind     kind
	implicit bool
}

func (f File) kind() kind {
	switch {
	case f.Link != "":
		return kindLink
	case f.Mode&fs.ModeDir != 0:
		return kindDir
	}
	return kindFile
}

// same reports whether two Files describe the same entry, so a file listed twice (a library two
// binaries need) is kept once while two different contents at one path are an error.
func (f File) same(g File) bool {
	return f.kind() == g.kind() && f.Link == g.Link && f.Src == g.Src &&
		string(f.Data) == string(g.Data) && f.Mode == g.Mode
}

// entries validates files and returns every entry of the layer, parent directories included,
// in path order: a directory comes before everything in it.
func entries(files []File) ([]entry, error) {
	byPath := map[string]*entry{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("file %q: path must be absolute, clean and not /", f.Path)
		}
		k := f.kind()
		switch {
		case k == kindLink && (f.Src != "" || f.Data != nil || f.Mode&fs.ModeDir != 0):
			return nil, fmt.Errorf("file %s: a symlink has no Src, Data or directory mode", f.Path)
		case k == kindDir && (f.Src != "" || f.Data != nil):
			return nil, fmt.Errorf("file %s: a directory has no Src or Data", f.Path)
		case k == kindFile && f.Src != "" && f.Data != nil:
			return nil, fmt.Errorf("file %s: both Src and Data", f.Path)
		case f.Mode&^(fs.ModeDir|fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0:
			return nil, fmt.Errorf("file %s: unsupported mode %v", f.Path, f.Mode)
		}
		if old, ok := byPath[f.Path]; ok {
			if old.implicit && k == kindDir {
				old.File, old.implicit = f, false
				continue
			}
			if old.implicit {
				return nil, fmt.Errorf("file %s: not a directory, but other files are under it", f.Path)
			}
			if !old.same(f) {
				return nil, fmt.Errorf("file %s: listed twice with different content or mode", f.Path)
			}
			continue
		}
		byPath[f.Path] = &entry{File: f, kind: k}
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; ok {
				continue
			}
			byPath[d] = &entry{File: Dir(d, 0), kind: kindDir, implicit: true}
		}
	}
	out := make([]entry, 0, len(byPath))
	for _, e := range byPath {
		// A file "under" a symlink would be unpacked through the link, or the link would
		// replace the directory, depending on the order: neither is what was meant.
		for d := path.Dir(e.Path); d != "/"; d = path.Dir(d) {
			if p := byPath[d]; p.kind != kindDir {
				return nil, fmt.Errorf("file %s: parent %s is not a directory in the image (list the file under the link's target)", e.Path, d)
			}
		}
		out = append(out, *e)
	}
	// Plain string order puts a directory before its contents: a parent is a prefix.
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// splitRef returns the repository and tag of a reference "repo:tag"; a digest or a missing tag
// is an error, since the import names the image after its tag.
func splitRef(ref string) (repo, tag string, err error) {
	i := strings.LastIndex(ref, ":")
	if i <= 0 || strings.Contains(ref[i+1:], "/") || strings.Contains(ref, "@") || i == len(ref)-1 {
		return "", "", fmt.Errorf("image reference %q: want repository:tag", ref)
	}
	repo, tag = ref[:i], ref[i+1:]
	if strings.ToLower(repo) != repo || strings.ContainsAny(ref, " \t\n") {
		return "", "", fmt.Errorf("image reference %q: repository must be lower case, without spaces", ref)
	}
	return repo, tag, nil
}
