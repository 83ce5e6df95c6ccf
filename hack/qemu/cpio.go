package qemu

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Mode bits of the newc format (they are the Linux st_mode bits).
const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeCharDev = 0o020000
)

// entry is one member of the initramfs. Exactly one of hostPath, data or link carries the
// content of a regular file or symlink; directories and devices have none.
type entry struct {
	name     string // archive path, no leading slash
	mode     uint32 // type and permission bits
	hostPath string // regular file read from the host at write time
	data     []byte // regular file given inline
	link     string // symlink target
	rdevMaj  uint32
	rdevMin  uint32
	size     int64
	sum      string // sha256 of the content, for the cache key
}

// archive is an in-memory description of the initramfs, keyed by archive path, so that a file
// reached through two host paths is packed once and every parent directory exists before its
// children (the kernel's unpacker does not create parents).
type archive struct {
	entries map[string]*entry
}

func newArchive() *archive { return &archive{entries: map[string]*entry{}} }

func (a *archive) add(e *entry) error {
	e.name = strings.TrimPrefix(path.Clean("/"+e.name), "/")
	if e.name == "" {
		return nil
	}
	if old, ok := a.entries[e.name]; ok {
		if old.mode&0o170000 == e.mode&0o170000 && old.link == e.link && old.hostPath == e.hostPath && string(old.data) == string(e.data) {
			return nil
		}
		if old.mode&0o170000 == modeDir && e.mode&0o170000 == modeDir {
			return nil
		}
		return fmt.Errorf("initramfs path %q added twice with different content", e.name)
	}
	for dir := path.Dir(e.name); dir != "."; dir = path.Dir(dir) {
		if p, ok := a.entries[dir]; ok {
			if p.mode&0o170000 != modeDir {
				return fmt.Errorf("initramfs path %q: parent %q is not a directory", e.name, dir)
			}
			continue
		}
		a.entries[dir] = &entry{name: dir, mode: modeDir | 0o755}
	}
	a.entries[e.name] = e
	return nil
}

func (a *archive) sorted() []*entry {
	out := make([]*entry, 0, len(a.entries))
	for _, e := range a.entries {
		out = append(out, e)
	}
	// A parent is a prefix of its children, so plain string order puts it first.
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// writeNewc writes the archive in the "newc" cpio format the kernel unpacks. Timestamps and
// owners are zero so the same inputs give the same bytes.
func (a *archive) writeNewc(w io.Writer, open func(string) (io.ReadCloser, error)) error {
	ino := uint32(1)
	var written int64
	pad := func() error {
		if n := (4 - written%4) % 4; n > 0 {
			m, err := w.Write(make([]byte, n))
			written += int64(m)
			return err
		}
		return nil
	}
	header := func(name string, mode uint32, size int64, nlink, rmaj, rmin uint32) error {
		h := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, mode, 0, 0, nlink, 0, size, 0, 0, rmaj, rmin, len(name)+1, 0)
		ino++
		m, err := io.WriteString(w, h+name+"\x00")
		written += int64(m)
		if err != nil {
			return err
		}
		return pad()
	}
	for _, e := range a.sorted() {
		switch e.mode & 0o170000 {
		case modeDir:
			if err := header(e.name, e.mode, 0, 2, 0, 0); err != nil {
				return err
			}
		case modeCharDev:
			if err := header(e.name, e.mode, 0, 1, e.rdevMaj, e.rdevMin); err != nil {
				return err
			}
		case modeSymlink:
			if err := header(e.name, e.mode, int64(len(e.link)), 1, 0, 0); err != nil {
				return err
			}
			m, err := io.WriteString(w, e.link)
			written += int64(m)
			if err != nil {
				return err
			}
			if err := pad(); err != nil {
				return err
			}
		case modeRegular:
			if err := header(e.name, e.mode, e.size, 1, 0, 0); err != nil {
				return err
			}
			if e.hostPath == "" {
				m, err := w.Write(e.data)
				written += int64(m)
				if err != nil {
					return err
				}
			} else {
				f, err := open(e.hostPath)
				if err != nil {
					return err
				}
				m, err := io.CopyN(w, f, e.size)
				written += m
				f.Close()
				if err != nil {
					return fmt.Errorf("copy %s into initramfs: %w", e.hostPath, err)
				}
			}
			if err := pad(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("initramfs path %q: unsupported mode %s", e.name, fs.FileMode(e.mode))
		}
	}
	if err := header("TRAILER!!!", 0, 0, 1, 0, 0); err != nil {
		return err
	}
	return nil
}
