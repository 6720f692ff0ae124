// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// iotrace: pairs I/O syscall enters and exits in the kernel and sends one
// record per completed call through a ring buffer. Filters (syscall set,
// pid, tid, comm, cgroup, minimum duration) run here, before anything is
// copied, so filtered calls never cross the ring buffer.
//
// Two ways to attach, chosen by the loader:
//  - fentry/fexit on the traced syscalls' __x64_sys_* functions (one copy of
//    call_enter and call_exit loaded per syscall): untraced syscalls pay
//    nothing, and enter and exit are paired in task storage;
//  - the fallback where BPF trampolines are missing: raw tracepoints on
//    sys_enter and sys_exit (every syscall of every task runs them, on the
//    kernel's slow syscall path), paired in an LRU hash keyed by thread id.
//
// Build: go generate ./internal/tracer (see internal/tracer/doc.go).

//go:build ignore

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "iotrace.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Filters, fixed at load time (the loader rewrites these constants), so the
// verifier drops the branches of filters that are off.
volatile const u32 filter_pid = 0;
volatile const u32 exclude_pid = 0; // the tracer itself: its own writes would feed back
volatile const u32 filter_tid = 0;
volatile const u32 filter_tid_tgid = 0; // the process of filter_tid
volatile const u64 filter_cgroup = 0;
volatile const u64 min_duration_ns = 0;
// Wake the reader only once this much is waiting: a wakeup per record costs
// the traced thread an irq_work; the reader also polls on a timer.
volatile const u64 wakeup_bytes = 0;
volatile const u8 filter_comm_len = 0;
volatile const char filter_comm[TASK_COMM_LEN] = {};
// traced[nr] is the sluice syscall id (SC_*) of syscall number nr, 0 when
// the syscall is not traced, with KEEP_FLAG when the minimum duration does
// not apply to it.
volatile const u8 traced[MAX_SYSCALL_NR] = {};

struct inflight {
	u64 enter_ts;
	u64 last_exit_ts; // of this thread's previous traced syscall
	u64 ptr1;         // user pointer of the first path
	u64 ptr2;         // user pointer of the second path (rename)
	u64 fds_ptr;      // user pointer of the int[2] pipe and socketpair fill
	u64 flags;
	s32 fd;
	s32 fd2;
	u16 sc;
	u16 active;
	u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct inflight);
} inflight SEC(".maps");

// task_inflight pairs enter and exit in fentry mode: per-task storage is a
// pointer chase from the task, no hashing, and it goes away with the task.
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct inflight);
} task_inflight SEC(".maps");

// comm_procs holds the processes (tgids) where a thread of the --comm name
// has run a traced call: their other threads share its fd table, so their
// fd table calls are wanted too, as the --tid thread's siblings' are.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, u8);
} comm_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24); // resized by the loader
} events SEC(".maps");

// lost[0]: records the ring buffer had no room for.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

// scratch holds the record being built: records with paths are larger than
// the BPF stack.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct record);
} scratch SEC(".maps");

static __always_inline bool comm_matches(void)
{
	char comm[TASK_COMM_LEN];
	bpf_get_current_comm(comm, sizeof(comm));
	// filter_comm is NUL-padded, so comparing up to and including index
	// filter_comm_len is an exact match.
#pragma unroll
	for (int i = 0; i < TASK_COMM_LEN; i++) {
		if (i > filter_comm_len)
			break;
		if (comm[i] != filter_comm[i])
			return false;
	}
	return true;
}

// What wanted says of a task.
#define WANT_NONE 0
#define WANT_ALL 1
#define WANT_FDS 2 // only the fd table's calls: a thread beside the --tid one

// comm_wanted applies the comm filter to the current task of process pid:
// a thread of another name is WANT_FDS in a process where one of the name
// has run (comm_procs), since they share the fd table.
static __always_inline int comm_wanted(u32 pid, int w)
{
	if (comm_matches()) {
		if (!bpf_map_lookup_elem(&comm_procs, &pid)) {
			u8 one = 1;
			bpf_map_update_elem(&comm_procs, &pid, &one, BPF_ANY);
		}
		return w;
	}
	return bpf_map_lookup_elem(&comm_procs, &pid) ? WANT_FDS : WANT_NONE;
}

// wanted applies the pid, tid, comm and cgroup filters to the current task.
// The other threads of the tid filter's process share its fd table, so
// their opens, closes and dups are wanted too (user space drops their rows);
// so are those of a thread of another name beside a --comm thread.
static __always_inline int wanted(u64 pid_tgid)
{
	u32 pid = pid_tgid >> 32;
	if (filter_pid && pid != filter_pid)
		return WANT_NONE;
	if (exclude_pid && pid == exclude_pid)
		return WANT_NONE;
	int w = WANT_ALL;
	if (filter_tid && (u32)pid_tgid != filter_tid) {
		if (pid != filter_tid_tgid)
			return WANT_NONE;
		w = WANT_FDS;
	}
	if (filter_cgroup && bpf_get_current_cgroup_id() != filter_cgroup)
		return WANT_NONE;
	if (filter_comm_len)
		return comm_wanted(pid, w);
	return w;
}

// wanted_call is wanted for a call of traced[] entry t.
static __always_inline bool wanted_call(int w, u8 t)
{
	return (t & 0x7f) && (w == WANT_ALL || (w == WANT_FDS && (t & KEEP_FLAG)));
}

static __always_inline void count_lost(void)
{
	u32 zero = 0;
	u64 *n = bpf_map_lookup_elem(&lost, &zero);
	if (n)
		*n += 1;
}

// wakeup_flags wakes the reader only when this record of size bytes takes
// the unread data across wakeup_bytes: once per fill, not once per record
// while the reader catches up (a wakeup storm cost 20 µs per call). The
// reader also polls on a timer, so a crossing missed between two CPUs is
// read at the next poll.
static __always_inline u64 wakeup_flags(u64 size)
{
	if (!wakeup_bytes)
		return 0;
	u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	return avail < wakeup_bytes && avail + size >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

// fd_ino is the inode number of the current task's open fd, 0 if none.
static __always_inline u32 fd_ino(s32 fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd < 0 || (u32)fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *file = 0;
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return 0;
	return (u32)BPF_CORE_READ(file, f_inode, i_ino);
}

// new_fds fills in the fds a successful pipe, pipe2 or socketpair wrote to
// user memory (fd, fd2) and, for those and socket and accept, the inode
// numbers their names need (pipe:[ino], socket:[ino]); read at exit, while
// the fds are certainly still the new ones.
static __always_inline void new_fds(struct record *r, struct inflight *f, s64 ret)
{
	if (ret < 0)
		return;
	switch (f->sc) {
	case SC_PIPE:
	case SC_PIPE2:
	case SC_SOCKETPAIR: {
		s32 fds[2] = {-1, -1};
		if (bpf_probe_read_user(fds, sizeof(fds), (void *)f->fds_ptr))
			return;
		r->fd = fds[0];
		r->fd2 = fds[1];
		r->ino = fd_ino(fds[0]);
		r->ino2 = f->sc == SC_SOCKETPAIR ? fd_ino(fds[1]) : r->ino;
		break;
	}
	case SC_SOCKET:
	case SC_ACCEPT:
	case SC_ACCEPT4:
		r->ino = fd_ino((s32)ret);
		break;
	}
}

// fill_header fills the fixed part of a syscall record.
static __always_inline void fill_header(struct record *r, struct inflight *f, u64 pid_tgid, u64 dur, u64 gap, s64 ret)
{
	r->ts = f->enter_ts;
	r->duration = dur;
	r->gap = gap;
	r->ret = ret;
	r->cgroup = bpf_get_current_cgroup_id();
	r->flags = f->flags;
	r->pid = pid_tgid >> 32;
	r->tid = (u32)pid_tgid;
	r->fd = f->fd;
	r->fd2 = f->fd2;
	r->sc = f->sc;
	r->kind = KIND_SYSCALL;
	r->path_len = 0;
	r->path2_len = 0;
	r->ino = 0;
	r->ino2 = 0;
	new_fds(r, f, ret);
	bpf_get_current_comm(r->comm, sizeof(r->comm));
}

// decode_args saves what a record needs of the call's arguments (its fd,
// path pointers and flags) in f.
static __always_inline void decode_args(struct inflight *f, u16 sc, u64 a0, u64 a1, u64 a2, u64 a3, u64 a4)
{
	f->ptr1 = 0;
	f->ptr2 = 0;
	f->fds_ptr = 0;
	f->flags = 0;
	f->fd = -1;
	f->fd2 = -1;

	// Only arguments the syscall has are read: the registers past them
	// hold whatever the caller left there (a mode, a buffer address).
	switch (sc) {
	case SC_CHDIR:
	case SC_STAT:
	case SC_LSTAT:
	case SC_MKDIR:
	case SC_RMDIR:
	case SC_UNLINK:
	case SC_TRUNCATE:
		f->fd = AT_FDCWD_VAL;
		f->ptr1 = a0;
		break;
	case SC_OPEN:
		f->fd = AT_FDCWD_VAL;
		f->ptr1 = a0;
		f->flags = a1;
		break;
	case SC_CREAT:
		f->fd = AT_FDCWD_VAL;
		f->ptr1 = a0;
		f->flags = O_CREAT_VAL | O_WRONLY_VAL | O_TRUNC_VAL;
		break;
	case SC_MKDIRAT:
		f->fd = (s32)a0;
		f->ptr1 = a1;
		break;
	case SC_OPENAT:
	case SC_UNLINKAT:
	case SC_STATX:
		f->fd = (s32)a0;
		f->ptr1 = a1;
		f->flags = a2;
		break;
	case SC_NEWFSTATAT:
		f->fd = (s32)a0;
		f->ptr1 = a1;
		f->flags = a3;
		break;
	case SC_OPENAT2: {
		f->fd = (s32)a0;
		f->ptr1 = a1;
		u64 how_flags = 0;
		bpf_probe_read_user(&how_flags, sizeof(how_flags), (void *)a2);
		f->flags = how_flags;
		break;
	}
	case SC_RENAME:
		f->fd = AT_FDCWD_VAL;
		f->fd2 = AT_FDCWD_VAL;
		f->ptr1 = a0;
		f->ptr2 = a1;
		break;
	case SC_RENAMEAT:
	case SC_RENAMEAT2:
		f->fd = (s32)a0;
		f->ptr1 = a1;
		f->fd2 = (s32)a2;
		f->ptr2 = a3;
		if (sc == SC_RENAMEAT2)
			f->flags = a4;
		break;
	case SC_DUP2:
		f->fd = (s32)a0;
		f->fd2 = (s32)a1;
		break;
	case SC_DUP3:
	case SC_CLOSE_RANGE:
		f->fd = (s32)a0;
		f->fd2 = (s32)a1;
		f->flags = a2;
		break;
	case SC_FCNTL:
		f->fd = (s32)a0;
		f->flags = a1; // command
		f->fd2 = (s32)a2;
		break;
	case SC_SENDFILE:
	case SC_SPLICE:
	case SC_COPY_FILE_RANGE:
		// Record the source as fd and the destination as fd2.
		if (sc == SC_SENDFILE) {
			f->fd = (s32)a1;
			f->fd2 = (s32)a0;
		} else {
			f->fd = (s32)a0;
			f->fd2 = (s32)a2;
		}
		break;
	// New fds: flags holds the call's flags argument (its CLOEXEC bit
	// matters to the fd table), fd the fd it works on, if any.
	case SC_PIPE:
		f->fds_ptr = a0;
		break;
	case SC_PIPE2:
		f->fds_ptr = a0;
		f->flags = a1;
		break;
	case SC_SOCKET:
		f->flags = a1; // type, with SOCK_CLOEXEC and SOCK_NONBLOCK
		break;
	case SC_SOCKETPAIR:
		f->flags = a1;
		f->fds_ptr = a3;
		break;
	case SC_ACCEPT:
		f->fd = (s32)a0;
		break;
	case SC_ACCEPT4:
		f->fd = (s32)a0;
		f->flags = a3;
		break;
	case SC_EVENTFD:
	case SC_EPOLL_CREATE:
	case SC_INOTIFY_INIT:
		break;
	case SC_EVENTFD2:
	case SC_TIMERFD_CREATE:
	case SC_PIDFD_OPEN:
		f->flags = a1;
		break;
	case SC_EPOLL_CREATE1:
	case SC_INOTIFY_INIT1:
	case SC_USERFAULTFD:
		f->flags = a0;
		break;
	case SC_MEMFD_CREATE:
		f->ptr1 = a0; // the name, recorded as /memfd:NAME (deleted)
		f->flags = a1;
		break;
	case SC_SIGNALFD:
		f->fd = (s32)a0;
		break;
	case SC_SIGNALFD4:
		f->fd = (s32)a0;
		f->flags = a3;
		break;
	default:
		f->fd = (s32)a0;
		break;
	}
}

// start_call marks a call of syscall table entry t in flight in f.
static __always_inline void start_call(struct inflight *f, u8 t)
{
	f->sc = t & 0x7f;
	// Bit 0: a call is in flight; bit 1: send it whatever its duration
	// (opens, closes and dups keep the user-space fd table right).
	f->active = 1 | ((t & KEEP_FLAG) ? 2 : 0);
	f->enter_ts = bpf_ktime_get_ns();
}

// end_call closes the call in flight in f: its duration and gap, and
// whether it is to be sent (false: none in flight, or under the minimum
// duration).
static __always_inline bool end_call(struct inflight *f, u64 *dur, u64 *gap)
{
	u16 active = f->active;
	if (!active)
		return false;
	f->active = 0;
	u64 now = bpf_ktime_get_ns();
	*dur = now - f->enter_ts;
	*gap = f->last_exit_ts ? f->enter_ts - f->last_exit_ts : 0;
	f->last_exit_ts = now;
	return *dur >= min_duration_ns || (active & 2);
}

// read_path reads the path at ptr into r's paths at off and returns its
// length without the NUL, with PATH_TRUNCATED when the string went on past
// the MAX_PATH - 1 bytes read (the call fails with ENAMETOOLONG then).
static __always_inline u32 read_path(struct record *r, u32 off, u64 ptr)
{
	if (!ptr)
		return 0;
	off &= MAX_PATH - 1;
	long n = bpf_probe_read_user_str(&r->paths[off], MAX_PATH, (void *)ptr);
	if (n <= 1)
		return 0;
	u32 len = (u32)(n - 1) & (MAX_PATH - 1); // without the NUL
	if (n == MAX_PATH) {
		char next = 0;
		bpf_probe_read_user(&next, 1, (void *)(ptr + MAX_PATH - 1));
		if (next)
			len |= PATH_TRUNCATED;
	}
	return len;
}

// send_call writes the record of a completed call.
static __always_inline void send_call(struct inflight *f, u64 pid_tgid, u64 dur, u64 gap, s64 ret)
{
	if (!f->ptr1) {
		// No path: reserve the fixed-size record in the ring and fill it
		// in place.
		struct record *r = bpf_ringbuf_reserve(&events, RECORD_HEADER, 0);
		if (!r) {
			count_lost();
			return;
		}
		fill_header(r, f, pid_tgid, dur, gap, ret);
		u64 flags = wakeup_flags(RECORD_HEADER);
		bpf_ringbuf_submit(r, flags);
		return;
	}
	u32 zero = 0;
	struct record *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return;
	fill_header(r, f, pid_tgid, dur, gap, ret);
	u32 l1 = read_path(r, 0, f->ptr1);
	u32 n1 = l1 & (MAX_PATH - 1);
	u32 l2 = 0;
	if (f->ptr2)
		l2 = read_path(r, n1, f->ptr2);
	u32 n2 = l2 & (MAX_PATH - 1);
	r->path_len = l1;
	r->path2_len = l2;
	u64 size = RECORD_HEADER + n1 + n2;
	if (size > sizeof(*r))
		size = sizeof(*r);
	if (bpf_ringbuf_output(&events, r, size, wakeup_flags(size)))
		count_lost();
}

// --- fentry mode: the loader loads one copy of call_enter and call_exit
// per traced syscall, attached to its __x64_sys_* function (the section
// names' target is a placeholder).

SEC("fentry/__x64_sys_read")
int BPF_PROG(call_enter, const struct pt_regs *regs)
{
	// The task filters first: an excluded task pays this and nothing else.
	u64 pid_tgid = bpf_get_current_pid_tgid();
	int w = wanted(pid_tgid);
	if (w == WANT_NONE)
		return 0;
	long nr = regs->orig_ax;
	if (nr < 0 || nr >= MAX_SYSCALL_NR)
		return 0;
	u8 t = traced[nr];
	if (!wanted_call(w, t))
		return 0;
	struct inflight *f = bpf_task_storage_get(&task_inflight, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!f)
		return 0;
	start_call(f, t);
	return 0;
}

SEC("fexit/__x64_sys_read")
int BPF_PROG(call_exit, const struct pt_regs *regs, long ret)
{
	// The constant filters first spare an excluded task the storage
	// lookup; the others left no call in flight at enter.
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 pid = pid_tgid >> 32;
	if (filter_pid && pid != filter_pid)
		return 0;
	if (exclude_pid && pid == exclude_pid)
		return 0;
	if (filter_tid && pid != filter_tid_tgid)
		return 0;
	struct inflight *f = bpf_task_storage_get(&task_inflight, bpf_get_current_task_btf(), 0, 0);
	if (!f)
		return 0;
	u64 dur, gap;
	if (!end_call(f, &dur, &gap))
		return 0;
	// The saved user registers are the call's arguments, unchanged at exit.
	decode_args(f, f->sc, PT_REGS_PARM1_SYSCALL(regs), PT_REGS_PARM2_SYSCALL(regs), PT_REGS_PARM3_SYSCALL(regs),
		    PT_REGS_PARM4_SYSCALL(regs), PT_REGS_PARM5_SYSCALL(regs));
	send_call(f, pid_tgid, dur, gap, ret);
	return 0;
}

// A probe the loader loads and attaches to learn whether this kernel has
// BPF trampolines (sluice trace --check).
SEC("fentry/__x64_sys_getppid")
int BPF_PROG(probe_fentry)
{
	return 0;
}

// --- raw tracepoint mode with task storage (kernels without BPF
// trampolines): every syscall of every task runs these two programs.

SEC("raw_tracepoint/sys_enter")
int sys_enter_task(struct bpf_raw_tracepoint_args *ctx)
{
	// The task filters first: an excluded task pays this and nothing else.
	u64 pid_tgid = bpf_get_current_pid_tgid();
	int w = wanted(pid_tgid);
	if (w == WANT_NONE)
		return 0;
	long nr = (long)ctx->args[1];
	if (nr < 0 || nr >= MAX_SYSCALL_NR)
		return 0;
	u8 t = traced[nr];
	if (!wanted_call(w, t))
		return 0;
	struct inflight *f = bpf_task_storage_get(&task_inflight, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!f)
		return 0;
	start_call(f, t);
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int sys_exit_task(struct bpf_raw_tracepoint_args *ctx)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 pid = pid_tgid >> 32;
	if (filter_pid && pid != filter_pid)
		return 0;
	if (exclude_pid && pid == exclude_pid)
		return 0;
	if (filter_tid && pid != filter_tid_tgid)
		return 0;
	struct inflight *f = bpf_task_storage_get(&task_inflight, bpf_get_current_task_btf(), 0, 0);
	if (!f)
		return 0;
	u64 dur, gap;
	if (!end_call(f, &dur, &gap))
		return 0;
	// The argument registers are unchanged at exit (only ax holds the
	// return value): read them once, only for a call that is sent.
	struct pt_regs regs;
	if (bpf_probe_read_kernel(&regs, sizeof(regs), (void *)ctx->args[0]))
		return 0;
	decode_args(f, f->sc, PT_REGS_PARM1_SYSCALL(&regs), PT_REGS_PARM2_SYSCALL(&regs), PT_REGS_PARM3_SYSCALL(&regs),
		    PT_REGS_PARM4_SYSCALL(&regs), PT_REGS_PARM5_SYSCALL(&regs));
	send_call(f, pid_tgid, dur, gap, (s64)ctx->args[1]);
	return 0;
}

// --- raw tracepoint mode with a hash (kernels without task storage for
// raw tracepoint programs).


SEC("raw_tracepoint/sys_enter")
int sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	long nr = (long)ctx->args[1];
	if (nr < 0 || nr >= MAX_SYSCALL_NR)
		return 0;
	u8 t = traced[nr];
	u16 sc = t & 0x7f;
	if (!sc)
		return 0;
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!wanted_call(wanted(pid_tgid), t))
		return 0;

	// One copy of the saved registers instead of a probe read per
	// argument (pt_regs is user-visible ABI, fixed per architecture).
	struct pt_regs regs;
	if (bpf_probe_read_kernel(&regs, sizeof(regs), (void *)ctx->args[0]))
		return 0;

	u32 tid = (u32)pid_tgid;
	struct inflight *f = bpf_map_lookup_elem(&inflight, &tid);
	struct inflight fresh = {};
	if (!f) {
		if (bpf_map_update_elem(&inflight, &tid, &fresh, BPF_ANY))
			return 0;
		f = bpf_map_lookup_elem(&inflight, &tid);
		if (!f)
			return 0;
	}
	decode_args(f, sc, PT_REGS_PARM1_SYSCALL(&regs), PT_REGS_PARM2_SYSCALL(&regs), PT_REGS_PARM3_SYSCALL(&regs),
		    PT_REGS_PARM4_SYSCALL(&regs), PT_REGS_PARM5_SYSCALL(&regs));
	start_call(f, t);
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tid = (u32)pid_tgid;
	// Every syscall of every task ends here: the cheap filters first
	// spare the excluded tasks the hash lookup.
	if (filter_pid && (u32)(pid_tgid >> 32) != filter_pid)
		return 0;
	if (filter_tid && (u32)(pid_tgid >> 32) != filter_tid_tgid)
		return 0;
	struct inflight *f = bpf_map_lookup_elem(&inflight, &tid);
	if (!f)
		return 0;
	u64 dur, gap;
	if (!end_call(f, &dur, &gap))
		return 0;
	send_call(f, pid_tgid, dur, gap, (s64)ctx->args[1]);
	return 0;
}

// A process event (exec or exit) carries no syscall, only who.
static __always_inline void process_event(u16 kind)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (wanted(pid_tgid) == WANT_NONE)
		return;
	u32 zero = 0;
	struct record *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return;
	__builtin_memset(r, 0, RECORD_HEADER);
	r->ts = bpf_ktime_get_ns();
	r->cgroup = bpf_get_current_cgroup_id();
	r->pid = pid_tgid >> 32;
	r->tid = (u32)pid_tgid;
	r->fd = -1;
	r->fd2 = -1;
	r->kind = kind;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	if (bpf_ringbuf_output(&events, r, RECORD_HEADER, wakeup_flags(RECORD_HEADER)))
		count_lost();
}

// A new process starts with a copy of its parent's fd table: the record
// carries the parent as pid and the child as tid, so user space copies the
// table instead of reading the child's /proc later (a short-lived child
// is gone by then). New threads share the table and send nothing.
SEC("raw_tracepoint/sched_process_fork")
int process_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	u32 child_pid = BPF_CORE_READ(child, pid);
	u32 child_tgid = BPF_CORE_READ(child, tgid);
	if (child_pid != child_tgid)
		return 0;
	u64 pid_tgid = bpf_get_current_pid_tgid();
	if (wanted(pid_tgid) == WANT_NONE)
		return 0;
	u32 zero = 0;
	struct record *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return 0;
	__builtin_memset(r, 0, RECORD_HEADER);
	r->ts = bpf_ktime_get_ns();
	r->pid = pid_tgid >> 32;
	r->tid = child_tgid;
	r->fd = -1;
	r->fd2 = -1;
	r->kind = KIND_FORK;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	if (bpf_ringbuf_output(&events, r, RECORD_HEADER, wakeup_flags(RECORD_HEADER)))
		count_lost();
	return 0;
}

SEC("raw_tracepoint/sched_process_exec")
int process_exec(struct bpf_raw_tracepoint_args *ctx)
{
	process_event(KIND_EXEC);
	return 0;
}

static __always_inline void exit_event(void)
{
	// Only the whole process's exit closes its fds; threads share them.
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return;
	process_event(KIND_EXIT);
	if (filter_comm_len) {
		// After process_event: its filter check would add pid again.
		u32 pid = bpf_get_current_pid_tgid() >> 32;
		bpf_map_delete_elem(&comm_procs, &pid);
	}
}

// In fentry mode a task's storage goes away with the task.
SEC("raw_tracepoint/sched_process_exit")
int process_exit(struct bpf_raw_tracepoint_args *ctx)
{
	exit_event();
	return 0;
}

// In raw tracepoint mode the exiting thread's hash entry is deleted.
SEC("raw_tracepoint/sched_process_exit")
int process_exit_hash(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	bpf_map_delete_elem(&inflight, &tid);
	exit_event();
	return 0;
}
