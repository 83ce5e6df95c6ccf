package image

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// OCI media types and annotations the archive uses.
const (
	MediaTypeIndex     = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest  = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig    = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer     = "application/vnd.oci.image.layer.v1.tar"
	MediaTypeLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationRefName is the OCI name of a manifest in index.json. As containerd's own
	// exporter does, it holds the tag only (the OCI spec's recommendation).
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationImageName is the full reference `ctr images import` names the image after;
	// without it, ctr would need --base-name to make a name from the tag.
	AnnotationImageName = "io.containerd.image.name"

	layoutVersion = "1.0.0"
)

// Descriptor points to a blob: an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform is a descriptor's target.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Index is index.json.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Manifest is the image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Config is the image configuration. It has no creation time: a timestamp would change the
// digest of every rebuild.
type Config struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       ContainerConfig `json:"config"`
	RootFS       RootFS          `json:"rootfs"`
}

// ContainerConfig holds the defaults a container of the image starts with.
type ContainerConfig struct {
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

// RootFS lists the layers' diff IDs: the digests of the uncompressed layer tars.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// epoch is every entry's modification time. Not the zero Unix time: some tools take a zero
// mtime for "unset".
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Write writes img to w as an OCI image-layout tar archive: oci-layout, index.json naming the
// manifest after img.Ref, and blobs/sha256/ with the manifest, the config and the layer.
func Write(w io.Writer, img Image) error {
	_, tag, err := splitRef(img.Ref)
	if err != nil {
		return err
	}
	ents, err := entries(img.Files)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	// The layer goes to a temporary file first: the archive's tar header needs its size and
	// the manifest its digest before the layer's bytes can be written.
	tmp, err := os.CreateTemp("", "image-layer-*")
	if err != nil {
		return fmt.Errorf("layer of %s: %w", img.Ref, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	layer, diffID, err := writeLayer(tmp, ents, img.Gzip)
	if err != nil {
		return fmt.Errorf("write layer of %s: %w", img.Ref, err)
	}

	cfg, err := json.Marshal(Config{
		Architecture: "amd64",
		OS:           "linux",
		Config: ContainerConfig{
			Env: img.Env, Entrypoint: img.Entrypoint, Cmd: img.Cmd, WorkingDir: img.WorkingDir,
		},
		RootFS: RootFS{Type: "layers", DiffIDs: []string{diffID}},
	})
	if err != nil {
		return fmt.Errorf("config of %s: %w", img.Ref, err)
	}
	cfgDesc := descriptorOf(MediaTypeConfig, cfg)
	manifest, err := json.Marshal(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        cfgDesc,
		Layers:        []Descriptor{layer},
	})
	if err != nil {
		return fmt.Errorf("manifest of %s: %w", img.Ref, err)
	}
	mDesc := descriptorOf(MediaTypeManifest, manifest)
	mDesc.Platform = &Platform{Architecture: "amd64", OS: "linux"}
	mDesc.Annotations = map[string]string{AnnotationImageName: img.Ref, AnnotationRefName: tag}
	index, err := json.Marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{mDesc}})
	if err != nil {
		return fmt.Errorf("index of %s: %w", img.Ref, err)
	}

	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("layer of %s: %w", img.Ref, err)
	}
	tw := tar.NewWriter(w)
	add := func(name string, r io.Reader, size int64) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: epoch}); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, r, size); err != nil {
			return err
		}
		return nil
	}
	addBytes := func(name string, b []byte) error { return add(name, strings.NewReader(string(b)), int64(len(b))) }
	blobPath := func(d Descriptor) string { return "blobs/sha256/" + strings.TrimPrefix(d.Digest, "sha256:") }
	steps := []func() error{
		func() error { return addBytes("oci-layout", []byte(`{"imageLayoutVersion":"`+layoutVersion+`"}`)) },
		func() error { return addBytes("index.json", index) },
		func() error {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "blobs/", Mode: 0o755, ModTime: epoch})
		},
		func() error {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "blobs/sha256/", Mode: 0o755, ModTime: epoch})
		},
		func() error { return addBytes(blobPath(mDesc), manifest) },
		func() error { return addBytes(blobPath(cfgDesc), cfg) },
		func() error { return add(blobPath(layer), tmp, layer.Size) },
		tw.Close,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("write archive of %s: %w", img.Ref, err)
		}
	}
	return nil
}

func descriptorOf(mediaType string, b []byte) Descriptor {
	sum := sha256.Sum256(b)
	return Descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))}
}

// countingHash is a sha256 that counts what it hashed.
type countingHash struct {
	hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.Hash.Write(p)
}

func (c *countingHash) digest() string { return "sha256:" + hex.EncodeToString(c.Sum(nil)) }

// writeLayer writes the layer tar of ents to w (gzipped when asked) and returns its descriptor
// and diff ID.
func writeLayer(w io.Writer, ents []entry, compress bool) (Descriptor, string, error) {
	blob := &countingHash{Hash: sha256.New()}
	diff := &countingHash{Hash: sha256.New()}
	out := io.MultiWriter(w, blob)
	var gz *gzip.Writer
	mediaType := MediaTypeLayer
	if compress {
		// No name or time in the gzip header: the same tar gives the same bytes.
		gz = gzip.NewWriter(out)
		out = gz
		mediaType = MediaTypeLayerGzip
	}
	tw := tar.NewWriter(io.MultiWriter(out, diff))
	for _, e := range ents {
		if err := writeEntry(tw, e); err != nil {
			return Descriptor{}, "", fmt.Errorf("%s: %w", e.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return Descriptor{}, "", err
	}
	if gz != nil {
		if err := gz.Close(); err != nil {
			return Descriptor{}, "", err
		}
	}
	return Descriptor{MediaType: mediaType, Digest: blob.digest(), Size: blob.n}, diff.digest(), nil
}

// tarMode is the tar header mode of m's permission and special bits.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

func writeEntry(tw *tar.Writer, e entry) error {
	// Owner root with no user or group names: the layer must not depend on who built it.
	hdr := &tar.Header{Name: strings.TrimPrefix(e.Path, "/"), ModTime: epoch}
	switch e.kind {
	case kindDir:
		hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		hdr.Mode = tarMode(e.Mode)
		if e.Mode.Perm() == 0 {
			hdr.Mode |= 0o755
		}
		return tw.WriteHeader(hdr)
	case kindLink:
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, e.Link, 0o777
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag, hdr.Mode = tar.TypeReg, tarMode(e.Mode)
	if e.Src == "" {
		if e.Mode.Perm() == 0 {
			hdr.Mode |= 0o644
		}
		hdr.Size = int64(len(e.Data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(e.Data)
		return err
	}
	f, err := os.Open(e.Src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("source %s is not a regular file (%v)", e.Src, st.Mode().Type())
	}
	if e.Mode.Perm() == 0 {
		hdr.Mode |= tarMode(st.Mode())
	}
	hdr.Size = st.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// Exactly the size in the header, even if the file grows meanwhile.
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		return fmt.Errorf("copy %s: %w", e.Src, err)
	}
	return nil
}
