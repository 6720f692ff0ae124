package tracer

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestSummaryTableText checks that a file name with a newline stays on its
// row of the headless table, and that a long name cut to the key column
// is cut between runes and keeps its end.
func TestSummaryTableText(t *testing.T) {
	b := &signal.IOEvents{SyscallNames: syscallNames[:]}
	long := "/data/" + strings.Repeat("é", 60) + "/end.log"
	for _, p := range []string{"/tmp/a\nb.txt", long} {
		b.Append(&signal.IOEvent{Comm: b.AppendString("app"), Syscall: uint16(SysRead), Path: b.AppendString(p), Duration: 5})
	}
	s := NewSummary(time.Now())
	s.Add(b)
	var out strings.Builder
	WriteTable(&out, "files", s.TopFiles(ByOps, 10, ""), 48)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 || !utf8.ValidString(out.String()) {
		t.Fatalf("table of 2 files has %d lines (valid UTF-8: %v):\n%s", len(lines), utf8.ValidString(out.String()), out.String())
	}
	if !strings.Contains(out.String(), `/tmp/a\nb.txt`) {
		t.Errorf("newline not escaped:\n%s", out.String())
	}
	var cut string
	for _, l := range lines[2:] {
		if strings.Contains(l, "end.log") {
			cut = strings.Fields(l)[0]
		}
	}
	if utf8.RuneCountInString(cut) != 48 || !strings.HasPrefix(cut, "…é") || !strings.HasSuffix(cut, "/end.log") {
		t.Errorf("long key cut to %q (%d runes), want 48 runes: … and its end", cut, utf8.RuneCountInString(cut))
	}
	if got := s.TopFiles(ByOps, 10, "a\\nb")[0].Key; got != `/tmp/a\nb.txt` {
		t.Errorf("filtering by the shown key: %q", got)
	}
}
