package lake

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/signal"
)

func ioBatch(times ...int64) *signal.IOEvents {
	b := &signal.IOEvents{SyscallNames: []string{"", "read", "rename"}}
	for i, ts := range times {
		e := signal.IOEvent{Time: ts, Duration: int64(100 + i), PID: 7, TID: 8, Syscall: 1, FD: 3, Ret: 10, Bytes: 10,
			Comm: b.AppendString("app"), Path: b.AppendString("/data/f")}
		if i%2 == 1 {
			e.Syscall, e.Bytes, e.Ret, e.FD = 2, 0, 0, -1
			e.OldPath = b.AppendString("/data/old")
		}
		b.Append(&e)
	}
	return b
}

type ioRow struct {
	Time     time.Time `parquet:"time,timestamp(nanosecond)"`
	Duration int64     `parquet:"duration_ns"`
	Syscall  string    `parquet:"syscall"`
	Path     *string   `parquet:"path"`
	OldPath  *string   `parquet:"old_path"`
	Bytes    int64     `parquet:"bytes"`
	Host     string    `parquet:"host_name"`
}

func TestIOWriterPartitionsAndCommits(t *testing.T) {
	root := t.TempDir()
	h := time.Date(2026, 3, 1, 10, 59, 59, 0, time.UTC).UnixNano()
	var segs []Segment
	w, err := NewIOWriter(Options{Root: root}, "box", func(s Segment) error { segs = append(segs, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("bad tenant!", ioBatch(h)); err == nil {
		t.Fatal("invalid tenant accepted")
	}
	if err := w.Write("acme", ioBatch(h, h+int64(2*time.Second), h+int64(3*time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 || segs[0].Hour != 10 || segs[1].Hour != 11 || segs[0].Rows != 1 || segs[1].Rows != 2 {
		t.Fatalf("segments %+v", segs)
	}
	for _, s := range segs {
		if s.Table != TableIOEvents || s.Tenant != "acme" || s.Day != "2026-03-01" || s.SchemaHash == "" {
			t.Errorf("segment %+v", s)
		}
	}
	rows, err := parquet.ReadFile[ioRow](filepath.Join(root, filepath.FromSlash(segs[1].Path)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Syscall != "rename" || *rows[0].OldPath != "/data/old" || rows[1].Bytes != 10 ||
		rows[1].OldPath != nil || *rows[1].Path != "/data/f" || rows[0].Host != "box" || rows[0].Time.UnixNano() != h+int64(2*time.Second) {
		t.Fatalf("rows %+v", rows)
	}
}

func TestIOFileRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	f := newIOFile(&buf, "box", 3) // several row groups
	b := ioBatch(1, 2, 3, 4, 5, 6, 7)
	if err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.parquet")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pf.RowGroups()); n != 3 {
		t.Errorf("%d row groups, want 3", n)
	}
	if v, _ := pf.Lookup(MetaSort); v != IOSortKey {
		t.Errorf("footer sort %q", v)
	}
	rows, err := parquet.ReadFile[ioRow](path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 || rows[6].Duration != 106 {
		t.Fatalf("rows %+v", rows)
	}
}
