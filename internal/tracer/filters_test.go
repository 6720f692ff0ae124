package tracer

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestMatchGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"/var/lib/*.db", "/var/lib/a.db", true},
		{"/var/lib/*.db", "/var/lib/x/a.db", false}, // * stays in one component
		{"/var/lib/**/*.db", "/var/lib/a.db", true}, // ** may be no component
		{"/var/lib/**/*.db", "/var/lib/x/y/a.db", true},
		{"/var/lib/**/*.db", "/var/lib/x/y/a.dbx", false},
		{"/var/lib/**", "/var/lib/x/y", true},
		{"/var/lib/**", "/var/lib", false},
		{"/tmp/a?c/[0-9]*", "/tmp/abc/7z", true},
		{"/tmp/a?c/[0-9]*", "/tmp/abc/z7", false},
		{"/tmp/run 2", "/tmp/run 2", true},
		{"/**/core", "/core", true},
		{"/**/core", "/a/b/core", true},
		{"/**/core", "/a/b/core/x", false},
		{"/a/b", "/a/b/c", false},
		{"/a/b/c", "/a/b", false},
	} {
		if got := matchGlob(c.pattern, c.name); got != c.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

// TestFilterValues checks that a filter value that would select nothing,
// and never say so, is refused with its reason.
func TestFilterValues(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{PathPrefix: "var/log"}, "absolute"},
		{Options{PathGlob: "*.log"}, "absolute"},
		{Options{PathGlob: "/var/[a-/x"}, "bad pattern"},
		{Options{Comm: "a-very-long-command"}, "15 bytes"},
		{Options{MinDuration: -1}, "negative"},
	} {
		c.opts.setDefaults()
		if err := c.opts.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.opts, err, c.want)
		}
	}
	ok := Options{PathPrefix: "/var/log", PathGlob: "/var/**/*.log"}
	ok.setDefaults()
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}

	self := uint32(os.Getpid())
	if g, err := checkTasks("/proc", self, 0); err != nil || g != self {
		t.Errorf("own pid: %d, %v", g, err)
	}
	if g, err := checkTasks("/proc", 0, self); err != nil || g != self {
		t.Errorf("own tid: %d, %v", g, err)
	}
	if _, err := checkTasks("/proc", 1<<30, 0); err == nil || !strings.Contains(err.Error(), "no such process") {
		t.Errorf("missing pid: %v", err)
	}
	if _, err := checkTasks("/proc", 0, 1<<30); err == nil || !strings.Contains(err.Error(), "no such thread") {
		t.Errorf("missing tid: %v", err)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		if task.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		tid, _ := strconv.ParseUint(task.Name(), 10, 32)
		if _, err := checkTasks("/proc", uint32(tid), 0); err == nil || !strings.Contains(err.Error(), "is a thread of process") {
			t.Errorf("a thread as the pid filter: %v", err)
		}
		break
	}
	if os.Getpid() != 1 {
		if _, err := checkTasks("/proc", 1, self); err == nil || !strings.Contains(err.Error(), "not of pid filter 1") {
			t.Errorf("tid of another process: %v", err)
		}
	}
}
