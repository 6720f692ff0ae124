//go:build linux

package tracer

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Capability bits (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// kernelVersion parses "6.18.44-..." into (6, 18).
func kernelVersion(rel string) (int, int, bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	minStr := parts[1]
	for i, c := range minStr {
		if c < '0' || c > '9' {
			minStr = minStr[:i]
			break
		}
	}
	mnr, err2 := strconv.Atoi(minStr)
	return maj, mnr, err1 == nil && err2 == nil
}

// effectiveCaps reads CapEff of this process.
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapEff in /proc/self/status")
}

// Check reports what this machine supports; the only thing it loads is a
// no-op fentry program, to learn the attach mode.
func Check() CheckReport { return check(true) }

func check(probe bool) CheckReport {
	var r CheckReport
	add := func(name string, ok, required bool, detail string) {
		r.Items = append(r.Items, CheckItem{Name: name, OK: ok, Required: required, Detail: detail})
	}
	add("architecture", Supported, true, archDetail())

	rel := kernelRelease()
	maj, mnr, ok := kernelVersion(rel)
	// Ring buffers need 5.8; CO-RE with BTF and raw tracepoints are older.
	kok := ok && (maj > 5 || maj == 5 && mnr >= 8)
	detail := rel
	if !kok {
		detail = rel + " (needs Linux 5.8 or newer for BPF ring buffers)"
	}
	add("kernel", kok, true, detail)

	caps, err := effectiveCaps()
	switch {
	case err != nil:
		add("privileges", false, true, "cannot read capabilities: "+err.Error())
	case os.Geteuid() == 0 && caps&(1<<capSysAdmin) != 0:
		add("privileges", true, true, "root")
	case caps&(1<<capBPF) != 0 && caps&(1<<capPerfmon) != 0:
		add("privileges", true, true, "CAP_BPF and CAP_PERFMON")
	case caps&(1<<capSysAdmin) != 0:
		add("privileges", true, true, "CAP_SYS_ADMIN")
	default:
		var miss []string
		if caps&(1<<capBPF) == 0 {
			miss = append(miss, "CAP_BPF")
		}
		if caps&(1<<capPerfmon) == 0 {
			miss = append(miss, "CAP_PERFMON")
		}
		who := "not root"
		if os.Geteuid() == 0 {
			// Root whose capabilities were dropped: a container, capsh,
			// a systemd unit's CapabilityBoundingSet.
			who = "root without CAP_SYS_ADMIN"
		}
		add("privileges", false, true, fmt.Sprintf("%s and missing %s: run as root with all capabilities, or grant CAP_BPF and CAP_PERFMON (`setcap cap_bpf,cap_perfmon+ep` the binary; a container's --cap-add)", who, strings.Join(miss, " and ")))
	}

	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		add("BTF", false, true, "/sys/kernel/btf/vmlinux is missing: the kernel needs CONFIG_DEBUG_INFO_BTF=y for CO-RE")
	} else {
		add("BTF", true, true, "/sys/kernel/btf/vmlinux")
	}

	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err == nil {
		d := "unlimited"
		if lim.Cur != unix.RLIM_INFINITY {
			d = fmt.Sprintf("%d KiB (raised at start; kernels >= 5.11 account BPF memory by cgroup instead)", lim.Cur>>10)
		}
		add("memlock limit", true, false, d)
	}

	switch {
	case !probe:
	case r.Err() != nil:
		add("attach", false, false, "not probed: a requirement above is missing")
	default:
		if err := probeAttach(); err != nil {
			add("attach", false, false, "raw tracepoints sys_enter/sys_exit, which every syscall of every task pays (fentry unavailable: "+err.Error()+")")
		} else {
			add("attach", true, false, "fentry/fexit on the traced syscalls' kernel functions only (BPF trampolines), pairing in task storage")
		}
	}

	d, ok2 := tracefsDetail()
	add("tracefs", ok2, false, d)
	add("ring buffer", kok, true, fmt.Sprintf("BPF_MAP_TYPE_RINGBUF, default %d MiB (--ring-size)", DefaultRingBytes>>20))
	return r
}

func tracefsDetail() (string, bool) {
	for _, p := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
		if _, err := os.Stat(p); err == nil {
			return "mounted at " + strings.TrimSuffix(p, "/events") + " (not needed: raw tracepoints)", true
		}
	}
	return "not mounted; not needed (sluice attaches raw tracepoints). To mount: mount -t tracefs nodev /sys/kernel/tracing", false
}

// quickCheck fails fast, with the check's words, when a requirement is
// missing, instead of a bare EPERM from the loader.
func quickCheck() error { return check(false).Err() }
