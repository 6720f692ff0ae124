package queue

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	crashDirEnv   = "SLUICE_QUEUE_CRASH_DIR"
	crashRoundEnv = "SLUICE_QUEUE_CRASH_ROUND"
)

var crashOpts = Options{SegmentBytes: 256 << 10, MaxBytes: 1 << 30}

// TestCrashChild is the process TestCrashKill9 kills: it appends under load
// and prints "end id seq size" for every acknowledged record.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashKill9")
	}
	round, _ := strconv.Atoi(os.Getenv(crashRoundEnv))
	opts := crashOpts
	opts.Dir = dir
	q, err := Open(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			id := round*100 + w
			var line []byte
			for seq := 0; ; seq++ {
				size := 16 + (seq*37+w*101)%4000
				end, err := q.Append(payload(id, seq, size))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				line = fmt.Appendf(line[:0], "%d %d %d %d\n", end, id, seq, size)
				outMu.Lock()
				os.Stdout.Write(line) // unbuffered: printed means acknowledged
				outMu.Unlock()
			}
		})
	}
	wg.Wait()
}

type crashAck struct {
	end           Position
	id, seq, size int
}

// TestCrashKill9 runs the appender in a child process, kills it with
// SIGKILL mid-stream, and checks that every record the child saw
// acknowledged survives intact. It repeats on the same directory so later
// rounds also recover from earlier kills.
func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	var acks []crashAck
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRoundEnv+"="+strconv.Itoa(round))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(out)
		target := 3000 + round*1000
		deadline := time.Now().Add(20 * time.Second)
		n, killed := 0, false
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				break // a partial last line was not fully printed: not counted
			}
			var a crashAck
			if _, perr := fmt.Sscanf(strings.TrimSpace(line), "%d %d %d %d", &a.end, &a.id, &a.seq, &a.size); perr != nil {
				continue // test framework chatter
			}
			acks = append(acks, a)
			n++
			if !killed && (n >= target || time.Now().After(deadline)) {
				// Kill mid-stream; lines already in the pipe are still read.
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		werr := cmd.Wait()
		if !killed {
			t.Fatalf("child exited by itself after %d acks: %v\n%s", n, werr, stderr.String())
		}
		t.Logf("round %d: %d acknowledged before SIGKILL", round, n)

		opts := crashOpts
		opts.Dir = dir
		opts.Logger = discardLogger()
		q, err := Open(opts)
		if err != nil {
			t.Fatalf("reopen after kill: %v", err)
		}
		got, r := drain(t, q, 0)
		r.Close()
		byEnd := make(map[Position][]byte, len(got))
		for _, g := range got {
			byEnd[g.end] = g.payload
		}
		for _, a := range acks {
			p, ok := byEnd[a.end]
			if !ok || !bytes.Equal(p, payload(a.id, a.seq, a.size)) {
				t.Fatalf("round %d: acknowledged record id=%d seq=%d at %d lost or damaged (found=%v)", round, a.id, a.seq, a.end, ok)
			}
		}
		st := q.Stats()
		if st.CorruptRecords != 0 {
			t.Fatalf("round %d: a process crash must not corrupt anything: %+v", round, st)
		}
		t.Logf("round %d: %d records on disk, stats %+v", round, len(got), st)
		q.Close()
	}
}
