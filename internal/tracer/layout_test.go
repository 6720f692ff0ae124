//go:build linux && amd64

package tracer

import (
	"testing"
	"unsafe"
)

// TestRecordLayout ties record.go's offsets to the C struct as bpf2go saw it.
func TestRecordLayout(t *testing.T) {
	var r iotraceRecord
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"ts", unsafe.Offsetof(r.Ts), offTs},
		{"duration", unsafe.Offsetof(r.Duration), offDuration},
		{"gap", unsafe.Offsetof(r.Gap), offGap},
		{"ret", unsafe.Offsetof(r.Ret), offRet},
		{"cgroup", unsafe.Offsetof(r.Cgroup), offCgroup},
		{"flags", unsafe.Offsetof(r.Flags), offFlags},
		{"pid", unsafe.Offsetof(r.Pid), offPid},
		{"tid", unsafe.Offsetof(r.Tid), offTid},
		{"fd", unsafe.Offsetof(r.Fd), offFd},
		{"fd2", unsafe.Offsetof(r.Fd2), offFd2},
		{"ino", unsafe.Offsetof(r.Ino), offIno},
		{"ino2", unsafe.Offsetof(r.Ino2), offIno2},
		{"sc", unsafe.Offsetof(r.Sc), offSc},
		{"path_len", unsafe.Offsetof(r.PathLen), offPathLen},
		{"path2_len", unsafe.Offsetof(r.Path2Len), offPath2Len},
		{"kind", unsafe.Offsetof(r.Kind), offKind},
		{"comm", unsafe.Offsetof(r.Comm), offComm},
		{"paths", unsafe.Offsetof(r.Paths), headerLen},
	} {
		if c.got != c.want {
			t.Errorf("%s at %d, record.go says %d", c.name, c.got, c.want)
		}
	}
	if len(syscallNumbers) != int(NumSyscalls) {
		t.Fatal("syscall table size")
	}
	for s := Syscall(1); s < NumSyscalls; s++ {
		if s != SysRead && syscallNumbers[s] == 0 {
			t.Errorf("%s has no x86_64 number", s)
		}
	}
}
