//go:build unix

package queue

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two queues on one directory would append over each other's records and
// delete each other's segments: the second Open is refused, and the lock
// goes with the first one's Close.
func TestOpenRefusesADirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	q, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append([]byte("first")); err != nil {
		t.Fatal(err)
	}
	q2, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10, MaxBytes: 1 << 20})
	if !errors.Is(err, ErrLocked) {
		if q2 != nil {
			q2.Close()
		}
		t.Fatalf("second Open on %s: err %v, want ErrLocked", dir, err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, LockName)) {
		t.Errorf("error %q does not name the lock file", err)
	}
	// The refused Open touched nothing: the first queue goes on.
	if _, err := q.Append([]byte("second")); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q3, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	defer q3.Close()
	if st := q3.Stats(); st.Records != 2 {
		t.Errorf("records after reopen: %d, want 2", st.Records)
	}
}

// The lock is the kernel's: another process holding it (here flock(1),
// as a second sluice would) makes Open fail; its death frees it.
func TestOpenRefusesADirectoryLockedByAnotherProcess(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) not installed")
	}
	dir := t.TempDir()
	cmd := exec.Command(flock, "-x", "-o", filepath.Join(dir, LockName), "sleep", "30")
	// flock(1) takes the lock, then forks sleep, which closes its copy of
	// the descriptor only when it runs: both die with the process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}
	defer kill()
	// Wait until flock(1) holds the lock: our own probe fails then.
	for i := 0; ; i++ {
		l, err := osFS{}.Lock(filepath.Join(dir, LockName))
		if err != nil {
			break
		}
		l.Close()
		if i > 500 {
			t.Fatal("flock(1) never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if q, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10, MaxBytes: 1 << 20}); !errors.Is(err, ErrLocked) {
		if q != nil {
			q.Close()
		}
		t.Fatalf("Open while another process holds the lock: err %v, want ErrLocked", err)
	}
	// kill -9: the kernel drops the lock with the last descriptor, which
	// may be the forked sleep's if it had not closed it yet (under load a
	// single Open here failed about 1 run in 20). sleep is not our child,
	// so its end cannot be waited for: Open is retried until it is gone.
	kill()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		q, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10, MaxBytes: 1 << 20})
		if err == nil {
			q.Close()
			break
		}
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("Open after the holder died: %v", err)
		}
	}
}

// A data directory the process may not write is refused at Open with an
// error naming it, not at the first Append.
func TestOpenReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes read-only directories")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	q, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10, MaxBytes: 1 << 20})
	if err == nil {
		q.Close()
		t.Fatal("Open on a read-only directory succeeded")
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the directory", err)
	}
}
