// Command images writes the cluster's container images as OCI archives for
// `ctr -n k8s.io images import`: pause.tar, tabby.tar and agnhost.tar in -out.
//
//	go run ./hack/cluster/cmd/images -out DIR -tabby-bin bin -agnhost PATH -tabby-tag TAG
//
// Run it from tabby's module (it builds the pause command); tabby's binaries come from
// `make build`. The chart's image.tag must be -tabby-tag.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/hack/cluster/image"
	"github.com/tabbynet/tabby/hack/cluster/images"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "directory to write the archives to (created if missing)")
	tabbyBin := flag.String("tabby-bin", envOr("TABBY_BIN", "bin"), "directory of make build's binaries")
	agnhost := flag.String("agnhost", filepath.Join(cacheDir(), "bin", "agnhost"), "the static agnhost binary")
	tag := flag.String("tabby-tag", "", "tag of the tabby image (default: git describe, as make build's VERSION)")
	only := flag.String("only", "pause,tabby,agnhost", "comma-separated images to write")
	gz := flag.Bool("gzip", false, "compress the layers (smaller archives, slower to write and import)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		flag.Usage()
		return fmt.Errorf("-out is required")
	}
	if *tag == "" {
		v, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
		if err != nil {
			return fmt.Errorf("-tabby-tag not given and git describe failed: %w", err)
		}
		*tag = strings.TrimSpace(string(v))
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	build := map[string]func() (image.Image, error){
		"pause": func() (image.Image, error) {
			bin, err := images.BuildPause(context.Background(), tmp)
			return images.Pause(bin), err
		},
		"tabby": func() (image.Image, error) { return images.Tabby(*tabbyBin, *tag) },
		"agnhost": func() (image.Image, error) {
			if _, err := os.Stat(*agnhost); err != nil {
				return image.Image{}, fmt.Errorf("agnhost binary: %w", err)
			}
			img, missing, err := images.Agnhost(*agnhost)
			if len(missing) > 0 {
				fmt.Fprintf(os.Stderr, "images: warning: the agnhost image lacks %s (not on this host): the e2e tests that run them will fail\n", strings.Join(missing, ", "))
			}
			return img, err
		},
	}
	for _, name := range strings.Split(*only, ",") {
		f, ok := build[name]
		if !ok {
			return fmt.Errorf("-only: unknown image %q", name)
		}
		img, err := f()
		if err != nil {
			return err
		}
		img.Gzip = *gz
		path := filepath.Join(*out, name+".tar")
		size, err := writeFile(path, img)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\t%.1f MB\n", img.Ref, path, float64(size)/1e6)
	}
	return nil
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

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// cacheDir is $TABBY_CACHE, by default ~/.cache/tabby, as in the Makefile.
func cacheDir() string {
	if d := os.Getenv("TABBY_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "tabby")
}
