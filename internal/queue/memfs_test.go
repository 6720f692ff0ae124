package queue

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"sync"
)

// memFS is an in-memory fileSystem that remembers what was made durable, so
// a test can cut the power (crashImage) and see what a real disk might keep.
// hook, if set, can fail or shorten operations to inject faults.
type memFS struct {
	mu      sync.Mutex
	names   map[string]*memNode // current directory entries
	durable map[string]*memNode // entries as of the last SyncDir
	hook    func(op, name string, n int) (int, error)

	capacity int64 // file system size for Space; 0 is 1 TiB
	used     int64 // bytes other writers use, for Space
}

type memNode struct {
	data    []byte // what reads see (the page cache)
	durable []byte // what survives a crash for sure
	// lost marks bytes that were dirty when an fsync failed. Like Linux, the
	// kernel then drops them: a later successful fsync does not persist
	// them unless they are written again.
	lost []bool
}

type memFile struct {
	fs     *memFS
	name   string
	node   *memNode
	write  bool
	closed bool
}

func newMemFS() *memFS {
	return &memFS{names: map[string]*memNode{}, durable: map[string]*memNode{}}
}

func (m *memFS) fault(op, name string, n int) (int, error) {
	if m.hook == nil {
		return n, nil
	}
	return m.hook(op, name, n)
}

func (m *memFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	n := m.names[name]
	if n == nil {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if _, err := m.fault("create", name, 0); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		n = &memNode{}
		m.names[name] = n
	} else if flag&os.O_EXCL != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	return &memFile{fs: m, name: name, node: n, write: flag&(os.O_RDWR|os.O_WRONLY) != 0}, nil
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if m.names[name] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.names, name)
	return nil
}

// Rename moves the entry. Until the next SyncDir a crash image may hold
// the file under the old name, the new one, both or neither (crashImage):
// more pessimistic than a journaling file system, whose rename is atomic.
func (m *memFS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldpath, newpath = path.Clean(oldpath), path.Clean(newpath)
	n := m.names[oldpath]
	if n == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	if _, err := m.fault("rename", oldpath, 0); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	delete(m.names, oldpath)
	m.names[newpath] = n
	return nil
}

func (m *memFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = path.Clean(dir)
	var out []string
	for name := range m.names {
		if path.Dir(name) == dir {
			out = append(out, path.Base(name))
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m *memFS) MkdirAll(string, os.FileMode) error { return nil }

// Lock always succeeds: a crash test opens the crash image while the
// crashed queue is still open, as a restarted process would find the lock
// free. The lock itself is tested on the OS file system (lock_test.go).
func (m *memFS) Lock(string) (io.Closer, error) { return io.NopCloser(nil), nil }

// Space reports capacity minus the bytes of every file (1 TiB when
// capacity is 0), plus what the test says others use (used).
func (m *memFS) Space(dir string) (free, total int64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.fault("statfs", dir, 0); err != nil {
		return 0, 0, err
	}
	total = m.capacity
	if total == 0 {
		total = 1 << 40
	}
	free = total - m.used
	for _, n := range m.names {
		free -= int64(len(n.data))
	}
	return free, total, nil
}

func (m *memFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.fault("syncdir", dir, 0); err != nil {
		return err
	}
	m.durable = make(map[string]*memNode, len(m.names))
	for k, v := range m.names {
		m.durable[k] = v
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed || !f.write {
		return 0, os.ErrClosed
	}
	n, err := f.fs.fault("write", f.name, len(p))
	if end := off + int64(n); end > int64(len(f.node.data)) {
		f.node.data = append(f.node.data, make([]byte, end-int64(len(f.node.data)))...)
	}
	copy(f.node.data[off:], p[:n])
	for i := off; i < off+int64(n) && i < int64(len(f.node.lost)); i++ {
		f.node.lost[i] = false
	}
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if _, err := f.fs.fault("truncate", f.name, 0); err != nil {
		return err
	}
	if size < int64(len(f.node.lost)) {
		f.node.lost = f.node.lost[:size]
	}
	if size < int64(len(f.node.data)) {
		f.node.data = f.node.data[:size:size]
	} else {
		f.node.data = append(f.node.data, make([]byte, size-int64(len(f.node.data)))...)
	}
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	n := f.node
	if _, err := f.fs.fault("sync", f.name, 0); err != nil {
		for len(n.lost) < len(n.data) {
			n.lost = append(n.lost, false)
		}
		for i := range n.data {
			if i >= len(n.durable) || n.data[i] != n.durable[i] {
				n.lost[i] = true
			}
		}
		return err
	}
	n.durable = bytes.Clone(n.data)
	for i, l := range n.lost {
		if l && i < len(n.durable) {
			n.durable[i] = 0
		}
	}
	return nil
}

// DataSync is Sync: the model keeps no metadata apart from the bytes.
func (f *memFile) DataSync() error { return f.Sync() }

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return nil
}

// crashImage returns a new memFS holding what a disk might contain after a
// power cut now: durable data always survives; each page of unsynced data
// independently survives, is lost, or reads back as zeros; the file size may
// or may not have been updated; entries created or removed since the last
// directory sync may or may not be there.
func (m *memFS) crashImage(rng *rand.Rand) *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashImageLocked(rng)
}

func (m *memFS) crashImageLocked(rng *rand.Rand) *memFS {
	out := newMemFS()
	keep := func(name string, n *memNode) {
		img := crashBytes(n.durable, n.data, rng)
		out.names[name] = &memNode{data: img, durable: bytes.Clone(img)}
	}
	for name, n := range m.names {
		if m.durable[name] == n || rng.IntN(2) == 0 {
			keep(name, n)
		}
	}
	for name, n := range m.durable {
		if _, ok := out.names[name]; !ok && m.names[name] != n && rng.IntN(2) == 0 {
			keep(name, n)
		}
	}
	for k, v := range out.names {
		out.durable[k] = v
	}
	return out
}

func crashBytes(durable, data []byte, rng *rand.Rand) []byte {
	const page = 512
	size := len(durable)
	if len(data) != len(durable) && rng.IntN(2) == 0 {
		lo, hi := min(len(durable), len(data)), max(len(durable), len(data))
		size = lo + rng.IntN(hi-lo+1)
	}
	// Synced bytes survive whatever else happens; only bytes beyond the
	// synced size (or changed since) are at risk.
	out := make([]byte, size)
	copy(out, durable)
	for p := 0; p < size; p += page {
		end := min(p+page, size)
		switch rng.IntN(3) {
		case 0: // the page reached the disk
			for i := p; i < end; i++ {
				if i < len(data) {
					out[i] = data[i]
				}
			}
		case 1: // old content (or zeros beyond the old size)
		case 2: // allocated but never written
			for i := max(p, len(durable)); i < end; i++ {
				out[i] = 0
			}
		}
	}
	return out
}

var errInjected = errors.New("injected fault")
