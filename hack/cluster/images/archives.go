package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/hack/cluster/image"
)

// Options say which archives WriteArchives writes, and from what.
type Options struct {
	Dir      string   // where the archives go (created if missing)
	TabbyBin string   // make build's binaries
	TabbyTag string   // the tag of tabby's image
	Agnhost  string   // the static agnhost binary
	CoreDNS  string   // the static coredns binary
	Only     []string // a subset of DefaultImages, or agnhost-anp; all of DefaultImages when empty
	Gzip     bool
	// Warn is told about a weaker image (an agnhost tool this host lacks); nil: ignored.
	Warn func(msg string)
}

// Archive is one written image archive.
type Archive struct {
	Ref  string
	Path string
	Size int64
}

// DefaultImages are the images WriteArchives writes when Options.Only is empty: what a cluster
// runs (the pod sandbox, tabby, the DNS add-on) and the e2e tests' agnhost and DNS prober.
var DefaultImages = []string{"pause", "tabby", "agnhost", "coredns", "glibc-dns-testing"}

// WriteArchives writes <name>.tar for each image into o.Dir.
func WriteArchives(ctx context.Context, o Options) ([]Archive, error) {
	only := o.Only
	if len(only) == 0 {
		only = DefaultImages
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	build := map[string]func() (image.Image, error){
		"pause": func() (image.Image, error) {
			bin, err := BuildPause(ctx, tmp)
			return Pause(bin), err
		},
		"tabby": func() (image.Image, error) { return Tabby(o.TabbyBin, o.TabbyTag) },
		"agnhost": func() (image.Image, error) {
			for _, bin := range []string{o.Agnhost, o.CoreDNS} {
				if _, err := os.Stat(bin); err != nil {
					return image.Image{}, fmt.Errorf("agnhost image: %w", err)
				}
			}
			img, missing, err := Agnhost(o.Agnhost, o.CoreDNS)
			if len(missing) > 0 && o.Warn != nil {
				o.Warn(fmt.Sprintf("the agnhost image lacks %s (not on this host): the e2e tests that run them will fail", strings.Join(missing, ", ")))
			}
			return img, err
		},
		"agnhost-anp": func() (image.Image, error) {
			img, _, err := ANPAgnhost(o.Agnhost, o.CoreDNS)
			return img, err
		},
		"coredns": func() (image.Image, error) { return CoreDNS(o.CoreDNS) },
		"glibc-dns-testing": func() (image.Image, error) {
			img, missing, err := GlibcDNSTesting(o.CoreDNS)
			if len(missing) > 0 && o.Warn != nil {
				o.Warn(fmt.Sprintf("the glibc-dns-testing image lacks %s (not on this host): the DNS tests will fail", strings.Join(missing, ", ")))
			}
			return img, err
		},
	}
	var out []Archive
	for _, name := range only {
		f, ok := build[name]
		if !ok {
			return nil, fmt.Errorf("unknown image %q (%s, agnhost-anp)", name, strings.Join(DefaultImages, ", "))
		}
		img, err := f()
		if err != nil {
			return nil, err
		}
		img.Gzip = o.Gzip
		path := filepath.Join(o.Dir, name+".tar")
		size, err := writeFile(path, img)
		if err != nil {
			return nil, err
		}
		out = append(out, Archive{Ref: img.Ref, Path: path, Size: size})
	}
	return out, nil
}

// writeFile writes img's archive to path through a temporary file, so a reader never sees a
// half-written archive.
func writeFile(path string, img image.Image) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := image.Write(f, img); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if err := f.Chmod(0o644); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return 0, err
	}
	return st.Size(), nil
}
