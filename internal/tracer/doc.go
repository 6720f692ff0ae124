// Package tracer traces file I/O syscalls with eBPF and turns them into
// signal.IOEvents batches. It is the only importer of github.com/cilium/ebpf.
//
// Kernel side (bpf/iotrace.c, CO-RE against the committed bpf/vmlinux.h),
// in one of two attach modes (AttachMode; Open picks fentry where the kernel
// allows it and says why when it falls back):
//
//   - fentry: one copy of call_enter (fentry) and call_exit (fexit) loaded
//     per traced syscall and attached to its __x64_sys_* function, so
//     untraced syscalls run no BPF at all; the call's arguments are read
//     from the saved user registers at exit;
//   - tracepoint: the raw tracepoints sys_enter and sys_exit (no tracefs
//     mount needed), which every syscall of every task runs.
//
// Both pair enter and exit in task storage (tracepoint mode falls back to
// an LRU hash keyed by thread id where raw tracepoint programs cannot use
// task storage) and send one record per completed call through a BPF ring
// buffer. sched_process_fork, sched_process_exec and sched_process_exit
// (raw tracepoints in both modes) send process records for the fd table.
// Filters run at entry, first thing, before anything is stored: pid, tid,
// comm and cgroup id (constants rewritten at load time, so filters that
// are off cost nothing), then the syscall set (a table indexed by syscall
// number); the minimum duration is checked at exit. Records the ring has
// no room for are counted in a per-CPU array (Tracer.Lost), never dropped
// silently.
//
// User side: Decoder turns records into rows without allocating per record.
// Paths of opened files come from the kernel (the open's path argument,
// read at exit), joined to the cwd or dirfd when relative; a (pid, fd)
// table follows open, dup, dup2, dup3, fcntl(F_DUPFD*, F_SETFD), close,
// close_range, fork (the child gets a copy), exec (CLOEXEC fds) and
// process exit. Fds without a path (pipe, socket, accept, eventfd, epoll,
// memfd, signalfd, timerfd, inotify, userfaultfd, pidfd) are named from the
// call that made them as /proc/PID/fd names them, with the inode number
// the kernel program read at the call's exit. /proc/<pid>/fd is read
// only for an fd the table has never seen, once (cached).
//
// AppendWire and DecodeWire (wire.go) are a batch's body in sluice run's
// queue; IOMetrics (iometrics.go) counts calls, bytes, errors and latency
// per syscall for /metrics and the headless summary.
//
// Regenerating the kernel program (only needed after changing bpf/):
//
//	apt-get install -y clang llvm libbpf-dev bpftool    # Debian, seconds
//	bpftool btf dump file /sys/kernel/btf/vmlinux format c > internal/tracer/bpf/vmlinux.h   # only to refresh it
//	go generate ./internal/tracer
//
// bpf2go (github.com/cilium/ebpf/cmd/bpf2go, pinned by go.mod) writes
// iotrace_x86_bpfel.go and iotrace_x86_bpfel.o; both are committed, so a
// plain go build needs no clang. Instead of Debian's clang, PyPI's ziglang
// package also compiles BPF (python -m ziglang cc -target bpfel-freestanding-none).
//
// Invariants:
//
//  1. A record's layout is struct record in bpf/iotrace.h; record.go's
//     offsets match it (TestRecordLayout checks them against bpf2go's type).
//  2. The Syscall ids are the SC_* enum of bpf/iotrace.h, in order.
//  3. Opens, closes, dups, fcntl, chdir, fchdir and the calls that make
//     fds without a path (fdBookkeeping) always cross the ring (KEEP_FLAG),
//     even when the user's syscall set, minimum duration, tid or comm
//     filter would drop them (the tid's sibling threads share its fd table;
//     so do threads of another name in a process where a thread of the
//     comm runs, kept in the kernel's comm_procs map), so the fd table
//     never goes stale; the Decoder drops those rows after using them.
//  4. Every record the kernel could not send is counted in Lost.
//  5. Row times are enter times in Unix ns (monotonic clock plus one offset
//     sampled at Open, so rows keep their exact order); Gap is the time since
//     the same thread's previous traced call ended.
//
// Concurrency: a Tracer is opened, Run by one goroutine, and Closed. Lost
// may be called from any goroutine. A Decoder is used by one goroutine.
package tracer
