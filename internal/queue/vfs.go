package queue

import (
	"io"
	"os"
)

// fileSystem is the narrow set of file operations the queue uses. The OS
// implementation is the only one in production; tests substitute a
// fault-injecting in-memory one to simulate failed writes, failed fsyncs
// and power loss.
type fileSystem interface {
	OpenFile(name string, flag int, perm os.FileMode) (file, error)
	Remove(name string) error
	// Rename replaces newpath's entry with oldpath's file (rename(2)).
	Rename(oldpath, newpath string) error
	// ReadDir returns the names (not paths) of the entries in dir.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes creations and removals of entries in dir durable.
	SyncDir(dir string) error
	// Space reports the bytes free for us and the size of the file system
	// holding dir (errors.ErrUnsupported where it cannot be known).
	Space(dir string) (free, total int64, err error)
	// Lock takes an exclusive lock on path for this Open (flock(2)); it
	// fails with ErrLocked while another holder has it. Closing the
	// result releases it.
	Lock(path string) (io.Closer, error)
}

type file interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Sync() error
	// DataSync makes the file's data durable, and of its metadata what
	// reading the data needs (size, blocks): fdatasync(2).
	DataSync() error
	Truncate(size int64) error
	Size() (int64, error)
}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (osFS) SyncDir(dir string) error {
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
