package tracer

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
)

// checkPathFilter checks a --path-prefix or --path-glob value: recorded
// paths are absolute, so a relative filter would keep nothing.
// CheckPathFilter checks a path prefix (glob false) or glob as Validate
// does, for a caller that names its own setting (receivers.iotrace).
func CheckPathFilter(v string, glob bool) error {
	if glob {
		return checkPathFilter("path glob", v, true)
	}
	return checkPathFilter("path prefix", v, false)
}

func checkPathFilter(flag, v string, glob bool) error {
	if v == "" {
		return nil
	}
	if !strings.HasPrefix(v, "/") {
		return fmt.Errorf("tracer: %s %q: want an absolute path (recorded paths are absolute)", flag, v)
	}
	if glob {
		for c := range strings.SplitSeq(v, "/") {
			if _, err := path.Match(c, ""); err != nil {
				return fmt.Errorf("tracer: %s %q: bad pattern in %q: %w", flag, v, c, err)
			}
		}
	}
	return nil
}

// matchGlob reports whether name matches pattern, component by component
// as path.Match matches them (*, ?, [a-z] within one component), where a
// ** component matches any number of components, none included.
func matchGlob(pattern, name string) bool {
	for {
		pc, prest, pmore := strings.Cut(pattern, "/")
		if pc == "**" {
			if !pmore {
				return true // a trailing ** matches the rest
			}
			for {
				if matchGlob(prest, name) {
					return true
				}
				_, rest, more := strings.Cut(name, "/")
				if !more {
					return false
				}
				name = rest
			}
		}
		nc, nrest, nmore := strings.Cut(name, "/")
		if ok, _ := path.Match(pc, nc); !ok {
			return false
		}
		if !pmore || !nmore {
			return pmore == nmore
		}
		pattern, name = prest, nrest
	}
}

// checkTasks fails on a pid or tid filter that names no task, or a pid
// that is a thread of another process (the kernel compares the process
// id): such a trace would show nothing and never say why. It returns the
// process the filters select, 0 for all.
func checkTasks(procRoot string, pid, tid uint32) (uint32, error) {
	tgid := func(id uint32) (uint32, error) {
		b, err := os.ReadFile(fmt.Sprintf("%s/%d/status", procRoot, id))
		if err != nil {
			return 0, err
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
				return uint32(n), err
			}
		}
		return 0, fmt.Errorf("no Tgid in %s/%d/status", procRoot, id)
	}
	var proc uint32
	if pid != 0 {
		g, err := tgid(pid)
		if err != nil {
			return 0, fmt.Errorf("tracer: pid filter %d: no such process", pid)
		}
		if g != pid {
			return 0, fmt.Errorf("tracer: pid filter %d is a thread of process %d: filter by tid %d or pid %d", pid, g, pid, g)
		}
		proc = pid
	}
	if tid != 0 {
		g, err := tgid(tid)
		if err != nil {
			return 0, fmt.Errorf("tracer: tid filter %d: no such thread", tid)
		}
		if pid != 0 && g != pid {
			return 0, fmt.Errorf("tracer: tid filter %d is a thread of process %d, not of pid filter %d", tid, g, pid)
		}
		proc = g
	}
	return proc, nil
}

// Cgroup2Root is where cgroup v2 is mounted: /sys/fs/cgroup, or
// /sys/fs/cgroup/unified on a host that mounts v1 and v2 side by side.
// The cgroup filter takes the id of a directory under it.
func Cgroup2Root() string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "/sys/fs/cgroup"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return f[4]
		}
	}
	return "/sys/fs/cgroup"
}
