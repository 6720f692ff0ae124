package ingest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/signal"
)

func TestCollectWalksOTLPNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.binpb", "b.json.gz", "c.pb.zst", "notes.txt", ".hidden.binpb", "sub/d.jsonl"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	explicit := filepath.Join(dir, "notes.txt")
	files, skipped, err := Collect([]string{dir, explicit})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.binpb", "b.json.gz", "c.pb.zst", "sub/d.jsonl", "notes.txt"}
	if len(files) != len(want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	for i, w := range want {
		if files[i] != filepath.Join(dir, w) {
			t.Errorf("files[%d] = %s, want %s", i, files[i], w)
		}
	}
	if len(skipped) != 1 || filepath.Base(skipped[0]) != "notes.txt" {
		t.Errorf("skipped %v, want notes.txt from the walk", skipped)
	}
	if _, _, err := Collect([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing path must be an error")
	}
}

func TestFileReaderDecompressionLimits(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte{0}, 1<<20)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(big)
	zw.Close()
	enc, _ := zstd.NewWriter(nil)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gzPath := write("bomb.gz", gz.Bytes())
	zstPath := write("bomb.zst", enc.EncodeAll(big, nil))
	empty := write("empty", nil)

	r := &fileReader{maxBytes: 64 << 10}
	for _, p := range []string{gzPath, zstPath} {
		if _, _, err := r.read(p); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: err %v, want ErrTooLarge", p, err)
		}
	}
	if _, _, err := r.read(empty); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty file: err %v, want ErrEmpty", err)
	}
	r = &fileReader{maxBytes: 4 << 20}
	for _, p := range []string{gzPath, zstPath} {
		got, _, err := r.read(p)
		if err != nil || !bytes.Equal(got, big) {
			t.Errorf("%s: %d bytes, err %v; want the original 1 MiB", p, len(got), err)
		}
	}
}

// countingSink records what reaches it.
type countingSink struct{ logs, points, spans int }

func (s *countingSink) WriteLogs(_ string, b *signal.Logs) error { s.logs += b.Len(); return nil }
func (s *countingSink) WriteMetrics(_ string, b *signal.Metrics) error {
	s.points += b.Len()
	return nil
}
func (s *countingSink) WriteSpans(_ string, b *signal.Spans) error { s.spans += b.Len(); return nil }

func TestRunGoesOnPastBadFiles(t *testing.T) {
	logs := corpustest.Files(t, "logs")
	bad := filepath.Join(t.TempDir(), "bad.binpb")
	if err := os.WriteFile(bad, []byte{0x0a, 0xff, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	files := append([]string{bad}, logs...)
	var sink countingSink
	var progressCalls int
	res, err := Run(context.Background(), files, &sink, Options{Tenant: "t", Progress: func(Progress) { progressCalls++ }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 || res.Failed[0].Path != bad {
		t.Fatalf("failed = %v, want only %s", res.Failed, bad)
	}
	if sink.logs != 6901 || res.Logs != 6901 || res.FilesDone != len(files) {
		t.Errorf("sink got %d logs, result %d logs, %d files done; want 6901 and %d", sink.logs, res.Logs, res.FilesDone, len(files))
	}
}

func TestRunStopsOnSinkError(t *testing.T) {
	logs := corpustest.Files(t, "logs")
	_, err := Run(context.Background(), logs, failingSink{}, Options{})
	if err == nil || !errors.Is(err, errSinkBroken) {
		t.Fatalf("err %v, want the sink's error", err)
	}
}

var errSinkBroken = errors.New("disk full")

type failingSink struct{}

func (failingSink) WriteLogs(string, *signal.Logs) error       { return errSinkBroken }
func (failingSink) WriteMetrics(string, *signal.Metrics) error { return errSinkBroken }
func (failingSink) WriteSpans(string, *signal.Spans) error     { return errSinkBroken }
