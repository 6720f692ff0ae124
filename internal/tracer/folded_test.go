package tracer

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

func TestFolded(t *testing.T) {
	b := &signal.IOEvents{SyscallNames: syscallNames[:]}
	add := func(comm string, sc Syscall, path string, dur, bytes int64) {
		b.Append(&signal.IOEvent{Comm: b.AppendString(comm), Syscall: uint16(sc), Path: b.AppendString(path), Duration: dur, Bytes: bytes})
	}
	add("db", SysRead, "/data/a;b.db", 100, 4096)
	add("db", SysRead, "/data/a;b.db", 300, 4096)
	add("db", SysFsync, "/data/a;b.db", 5000, 0)
	add("sh", SysWrite, "", 10, 3)
	add("my app", SysWrite, "/tmp/run 2", 7, 5)        // a frame ending in " 2" is no second weight
	add("w\\xffrk", SysWrite, "/tmp/50%;\nx\ty", 1, 1) // the decoder made the comm UTF-8 already
	for w, want := range map[Weight]string{
		WeightCount:    "db;fsync;data;a%3Bb.db 1\ndb;read;data;a%3Bb.db 2\nmy%20app;write;tmp;run%202 1\nsh;write;(no_path) 1\nw\\xffrk;write;tmp;50%25%3B%0Ax%09y 1\n",
		WeightDuration: "db;fsync;data;a%3Bb.db 5000\ndb;read;data;a%3Bb.db 400\nmy%20app;write;tmp;run%202 7\nsh;write;(no_path) 10\nw\\xffrk;write;tmp;50%25%3B%0Ax%09y 1\n",
		WeightBytes:    "db;read;data;a%3Bb.db 8192\nmy%20app;write;tmp;run%202 5\nsh;write;(no_path) 3\nw\\xffrk;write;tmp;50%25%3B%0Ax%09y 1\n",
	} {
		f := NewFolded(w)
		f.Add(b)
		var out strings.Builder
		if _, err := f.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("weight %d:\n%s\nwant\n%s", w, out.String(), want)
		}
	}
	if _, err := ParseWeight("size"); err == nil {
		t.Error("bad weight accepted")
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(func() string {
		f := NewFolded(WeightCount)
		f.Add(b)
		var out strings.Builder
		_, _ = f.WriteTo(&out)
		return out.String()
	}(), "\n"), "\n") {
		if strings.Count(line, " ") != 1 {
			t.Errorf("folded line %q: want exactly one space, before the weight", line)
		}
	}
	f := NewFolded(WeightCount)
	f.Add(b)
	if allocs := testing.AllocsPerRun(100, func() { f.Add(b) }); allocs != 0 {
		t.Errorf("%.0f allocations adding known stacks", allocs)
	}
}
