package tracer

import (
	"fmt"
	"time"
)

// Defaults of Options.
const (
	DefaultRingBytes  = 64 << 20
	DefaultBatchRows  = 8192
	DefaultFlushEvery = 200 * time.Millisecond
	maxSyscallNr      = 512 // MAX_SYSCALL_NR of bpf/iotrace.h
)

// AttachMode is how the kernel program is attached to the syscalls.
type AttachMode string

const (
	// AttachAuto uses fentry where the kernel has BPF trampolines and
	// falls back to raw tracepoints otherwise.
	AttachAuto AttachMode = ""
	// AttachFentry attaches fentry/fexit programs to the traced syscalls'
	// kernel functions only: untraced syscalls pay nothing.
	AttachFentry AttachMode = "fentry"
	// AttachTracepoint attaches the raw sys_enter and sys_exit
	// tracepoints, which every syscall of every task runs.
	AttachTracepoint AttachMode = "tracepoint"
)

// ParseAttachMode parses "auto", "fentry" or "tracepoint".
func ParseAttachMode(s string) (AttachMode, error) {
	switch s {
	case "", "auto":
		return AttachAuto, nil
	case string(AttachFentry), string(AttachTracepoint):
		return AttachMode(s), nil
	}
	return AttachAuto, fmt.Errorf("tracer: unknown attach mode %q (auto, fentry or tracepoint)", s)
}

// Options select what the kernel program traces. Filters other than
// PathPrefix and PathGlob run in the kernel, so what they exclude never reaches user
// space.
type Options struct {
	PID         uint32        // trace only this process (thread group); 0 all
	TID         uint32        // trace only this thread; 0 all
	Comm        string        // trace only tasks with this exact comm (at most 15 bytes); "" all
	Cgroup      uint64        // trace only this cgroup v2 id; 0 all
	Syscalls    SyscallSet    // rows wanted; the zero set is all
	MinDuration time.Duration // drop calls shorter than this
	PathPrefix  string        // keep rows whose path (or old path) starts with it (user space, before any copy out of the decoder)
	PathGlob    string        // keep rows whose path (or old path) matches it: * ? [..] within a component, ** any components
	RingBytes   int           // ring buffer size: a power of two, at least one page; default 64 MiB
	TraceSelf   bool          // also trace this process (excluded by default: its own output would feed back)
	Attach      AttachMode    // default AttachAuto
	StopOnExit  bool          // with TID: Run returns once that thread has exited; else with PID, once that process has (as strace -p ends)

	hashPairing bool // tracepoint mode pairs in the thread-id hash even where task storage works (benchmarks)

	BatchRows  int           // rows per batch handed to the sink; default 8192
	FlushEvery time.Duration // hand over a partial batch at least this often; default 200ms
}

func (o *Options) setDefaults() {
	if o.RingBytes == 0 {
		o.RingBytes = DefaultRingBytes
	}
	if o.BatchRows <= 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = DefaultFlushEvery
	}
}

// Validate checks the options (after defaults: a zero RingBytes is refused).
func (o *Options) Validate() error {
	if len(o.Comm) > commLen-1 {
		return fmt.Errorf("tracer: comm %q is longer than the kernel's 15 bytes", o.Comm)
	}
	if o.RingBytes < 4096 || o.RingBytes&(o.RingBytes-1) != 0 {
		return fmt.Errorf("tracer: ring buffer size %d is not a power of two of at least 4096 bytes", o.RingBytes)
	}
	if _, err := ParseAttachMode(string(o.Attach)); err != nil {
		return err
	}
	if o.MinDuration < 0 {
		return fmt.Errorf("tracer: negative minimum duration %s", o.MinDuration)
	}
	if err := checkPathFilter("path prefix", o.PathPrefix, false); err != nil {
		return err
	}
	return checkPathFilter("path glob", o.PathGlob, true)
}
