// Package tracer traces file I/O syscalls with eBPF and turns them into
// signal.IOEvents batches. It is the only importer of github.com/cilium/ebpf.
//
// Kernel side (bpf/iotrace.c, CO-RE against the committed bpf/vmlinux.h):
// raw tracepoints on sys_enter and sys_exit (no tracefs mount needed) pair
// each call's enter and exit in an LRU hash keyed by thread id, and send one
// record per completed call through a BPF ring buffer. sched_process_fork,
// sched_process_exec and sched_process_exit send process records for the
// fd table. Filters run
// at sys_enter, before anything is stored: the syscall set (a table indexed
// by syscall number), pid, tid, comm and cgroup id (constants rewritten at
// load time, so filters that are off cost nothing); the minimum duration is
// checked at sys_exit. Records the ring has no room for are counted in a
// per-CPU array (Tracer.Lost), never dropped silently.
//
// User side: Decoder turns records into rows without allocating per record.
// Paths of opened files come from the kernel (the open's path argument,
// read at exit), joined to the cwd or dirfd when relative; a (pid, fd)
// table follows open, dup, dup2, dup3, fcntl(F_DUPFD*, F_SETFD), close,
// close_range, fork (the child gets a copy), exec (CLOEXEC fds) and
// process exit. /proc/<pid>/fd is read
// only for an fd the table has never seen, once (cached).
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
//  3. Opens, closes, dups and fcntl always cross the ring (KEEP_FLAG), even
//     when the user's syscall set or minimum duration would drop them, so
//     the fd table never goes stale; the Decoder drops those rows after
//     using them.
//  4. Every record the kernel could not send is counted in Lost.
//  5. Row times are enter times in Unix ns (monotonic clock plus one offset
//     sampled at Open, so rows keep their exact order); Gap is the time since
//     the same thread's previous traced call ended.
//
// Concurrency: a Tracer is opened, Run by one goroutine, and Closed. Lost
// may be called from any goroutine. A Decoder is used by one goroutine.
package tracer
