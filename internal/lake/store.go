package lake

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Store holds lake objects under slash-separated paths relative to the lake
// root. It is shaped like an object store: objects are written whole and
// become visible atomically on Commit, never modified afterwards.
type Store interface {
	// Create starts writing the object at p; nothing is visible at p until
	// the returned writer's Commit succeeds.
	Create(p string) (ObjectWriter, error)
	// Open opens the object at p for random-access reading.
	Open(p string) (ObjectReader, error)
	// Remove deletes the object at p; a missing object is not an error.
	Remove(p string) error
	// Walk calls fn for every committed object whose path starts with
	// prefix, in lexical order.
	Walk(prefix string, fn func(p string, size int64) error) error
}

// ObjectWriter is an object being written. Exactly one of Commit or Abort
// must be called; after a failed Commit nothing is visible.
type ObjectWriter interface {
	io.Writer
	Commit() error
	Abort() error
}

// ObjectReader reads a committed object.
type ObjectReader interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// LocalStore is a Store over a local directory. Objects are written to
// <root>/_tmp, fsynced, renamed into place and the directory fsynced, so a
// crash leaves either the whole file or nothing under the final name. _tmp
// lives outside the table directories so that globbing readers never see a
// partial file.
type LocalStore struct{ Root string }

const tmpDir = "_tmp"

// NewLocalStore returns a store rooted at dir.
func NewLocalStore(dir string) *LocalStore { return &LocalStore{Root: dir} }

func (s *LocalStore) full(p string) (string, error) {
	if p == "" || path.IsAbs(p) || strings.Contains(p, "\\") {
		return "", fmt.Errorf("lake: bad object path %q", p)
	}
	if c := path.Clean(p); c != p || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("lake: bad object path %q", p)
	}
	return filepath.Join(s.Root, filepath.FromSlash(p)), nil
}

// Create implements Store.
func (s *LocalStore) Create(p string) (ObjectWriter, error) {
	final, err := s.full(p)
	if err != nil {
		return nil, err
	}
	tdir := filepath.Join(s.Root, tmpDir)
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		return nil, fmt.Errorf("create %q: %w", p, err)
	}
	f, err := os.CreateTemp(tdir, "*-"+path.Base(p)+".tmp")
	if err != nil {
		return nil, fmt.Errorf("create %q: %w", p, err)
	}
	return &localWriter{f: f, final: final, name: p}, nil
}

type localWriter struct {
	f     *os.File
	final string
	name  string
	done  bool
}

func (w *localWriter) Write(b []byte) (int, error) { return w.f.Write(b) }

func (w *localWriter) Commit() error {
	if w.done {
		return fmt.Errorf("commit %q: already finished", w.name)
	}
	w.done = true
	tmp := w.f.Name()
	fail := func(err error) error {
		_ = w.f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("commit %q: %w", w.name, err)
	}
	if err := w.f.Sync(); err != nil {
		return fail(err)
	}
	if err := w.f.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("commit %q: %w", w.name, err)
	}
	dir := filepath.Dir(w.final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("commit %q: %w", w.name, err)
	}
	if err := os.Rename(tmp, w.final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("commit %q: %w", w.name, err)
	}
	if err := syncDir(dir); err != nil {
		_ = os.Remove(w.final)
		return fmt.Errorf("commit %q: %w", w.name, err)
	}
	return nil
}

func (w *localWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	_ = w.f.Close()
	if err := os.Remove(w.f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("abort %q: %w", w.name, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Open implements Store.
func (s *LocalStore) Open(p string) (ObjectReader, error) {
	full, err := s.full(p)
	if err != nil {
		return nil, err
	}
	return openLocal(full)
}

type localReader struct {
	*os.File
	size int64
}

func (r *localReader) Size() int64 { return r.size }

func openLocal(full string) (*localReader, error) {
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &localReader{File: f, size: st.Size()}, nil
}

// Remove implements Store.
func (s *LocalStore) Remove(p string) error {
	full, err := s.full(p)
	if err != nil {
		return err
	}
	if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %q: %w", p, err)
	}
	return nil
}

// Walk implements Store. Temporary files under _tmp are never reported.
func (s *LocalStore) Walk(prefix string, fn func(p string, size int64) error) error {
	err := filepath.WalkDir(s.Root, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, rerr := filepath.Rel(s.Root, full)
		if rerr != nil {
			return rerr
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == tmpDir {
				return filepath.SkipDir
			}
			if rel != "." && !strings.HasPrefix(rel+"/", prefix) && !strings.HasPrefix(prefix, rel+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(rel, prefix) {
			return nil
		}
		info, ierr := d.Info()
		if ierr != nil {
			return ierr
		}
		return fn(rel, info.Size())
	})
	if err != nil {
		return fmt.Errorf("walk %q under %q: %w", prefix, s.Root, err)
	}
	return nil
}

// RemoveAll removes the objects at paths from store, going on after a
// failure, and returns every failure joined (nil if none). Missing objects
// are not failures.
func RemoveAll(store Store, paths []string) error {
	var errs []error
	for _, p := range paths {
		if err := store.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("remove %q: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
