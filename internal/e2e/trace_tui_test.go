package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
)

// traceHostileLoop writes files whose names hold terminal escapes (a
// window title, clear screen, a bell, a newline) in a loop until killed,
// so that the live view's tables and tail show them.
const traceHostileLoop = `import os, sys, time
d = os.fsencode(sys.argv[1])
print(os.getpid(), flush=True)
names = [b"t\x1b]0;pwned\x07x.dat", b"c\x1b[2Jlear\x1b[31m.dat", b"new\nline\r.dat", b"\x9b6n.dat"]
while True:
    for n in names:
        fd = os.open(d + b"/" + n, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, b"x" * 100)
        os.close(fd)
    time.sleep(0.02)
`

// pty is the controller side of a pseudo-terminal and what was read from it.
type pty struct {
	master, slave *os.File
	mu            sync.Mutex
	out           bytes.Buffer
}

func openPTY(t *testing.T, cols, rows uint16) *pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &pty{master: m, slave: s}
	p.resize(t, cols, rows)
	t.Cleanup(func() { m.Close(); s.Close() })
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return p
}

// resize sets the terminal's size; the kernel sends SIGWINCH to the
// terminal's foreground process group.
func (p *pty) resize(t *testing.T, cols, rows uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
}

func (p *pty) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the output holds s.
func (p *pty) waitFor(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.text(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on the terminal within %v; it shows:\n%q", s, within, tail(p.text(), 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestTraceLiveViewTerminal runs sluice trace's live view in a real
// pseudo-terminal on a workload whose file names hold terminal escapes,
// resizes the terminal down to 10x3 and back, and stops it by SIGINT, by
// ctrl+c typed and by q: each time it must exit 0, leave the alternate
// screen, show the cursor again, give the terminal back its modes (echo,
// canonical input), print the summary of the run after the view, and
// never pass a file name's escape sequence to the terminal.
func TestTraceLiveViewTerminal(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	py := python(t)
	for _, stop := range []string{"SIGINT", "ctrl+c", "q"} {
		t.Run(stop, func(t *testing.T) {
			work := t.TempDir()
			wl := exec.Command(py, "-c", traceHostileLoop, work)
			wout, err := wl.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			wl.Stderr = os.Stderr
			if err := wl.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = wl.Process.Kill(); _ = wl.Wait() })
			line, err := bufio.NewReader(wout).ReadString('\n')
			if err != nil {
				t.Fatalf("workload: %v", err)
			}

			term := openPTY(t, 100, 30)
			before, err := unix.IoctlGetTermios(int(term.slave.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			tr := exec.Command(sluiceBin, "trace", "--pid", strings.TrimSpace(line))
			tr.Stdin, tr.Stdout, tr.Stderr = term.slave, term.slave, term.slave
			tr.Env = append(os.Environ(), "TERM=xterm-256color")
			tr.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := tr.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tr.Process.Kill(); _ = tr.Wait() })
			term.waitFor(t, "lost 0", 20*time.Second)
			term.waitFor(t, ".dat", 10*time.Second) // the workload's files are on screen
			for _, size := range [][2]uint16{{40, 12}, {10, 3}, {1, 1}, {200, 60}, {80, 24}} {
				term.resize(t, size[0], size[1])
				time.Sleep(700 * time.Millisecond) // a refresh or more at this size
			}
			exited := make(chan error, 1)
			go func() { exited <- tr.Wait() }()
			select {
			case err := <-exited:
				t.Fatalf("sluice trace exited during the resizes: %v\n%q", err, tail(term.text(), 3000))
			default:
			}
			mark := len(term.text())
			switch stop {
			case "SIGINT":
				_ = tr.Process.Signal(syscall.SIGINT)
			case "ctrl+c":
				_, _ = term.master.Write([]byte{3})
			case "q":
				_, _ = term.master.Write([]byte("q"))
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("sluice trace: %v\n%q", err, tail(term.text(), 3000))
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("sluice trace did not stop on %s\n%q", stop, tail(term.text(), 3000))
			}
			time.Sleep(200 * time.Millisecond) // the reader drains the last output
			out := term.text()
			if i := strings.LastIndex(out, "\x1b[?1049l"); i < mark || i < strings.LastIndex(out, "\x1b[?1049h") {
				t.Errorf("the alternate screen was not left at the end:\n%q", tail(out, 2000))
			}
			if strings.LastIndex(out, "\x1b[?25h") < strings.LastIndex(out, "\x1b[?25l") {
				t.Errorf("the cursor was left hidden:\n%q", tail(out, 2000))
			}
			after := out[strings.LastIndex(out, "\x1b[?1049l"):]
			if !strings.Contains(after, "calls") || !strings.Contains(after, `pwned\x07x.dat`) {
				t.Errorf("no summary of the run after the view:\n%q", after)
			}
			for _, bad := range []string{"\x1b]0;pwned", "\x9b6n", "\x1b[31m.dat", "new\nline"} {
				if strings.Contains(out, bad) {
					t.Errorf("a file name's %q reached the terminal", bad)
				}
			}
			now, err := unix.IoctlGetTermios(int(term.slave.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			const modes = unix.ECHO | unix.ICANON | unix.ISIG
			if now.Lflag&modes != before.Lflag&modes || now.Iflag != before.Iflag || now.Oflag != before.Oflag {
				t.Errorf("terminal modes not restored: lflag %#x iflag %#x oflag %#x, were %#x %#x %#x",
					now.Lflag, now.Iflag, now.Oflag, before.Lflag, before.Iflag, before.Oflag)
			}
		})
	}
}
