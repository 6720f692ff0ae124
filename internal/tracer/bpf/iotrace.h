// SPDX-License-Identifier: (MIT OR GPL-2.0)
// Shared between iotrace.c and its Go decoder (internal/tracer/record.go):
// change both together.
#pragma once

#define TASK_COMM_LEN 16
#define MAX_SYSCALL_NR 512
#define MAX_PATH 4096
// Set in path_len or path2_len: the path went on past the MAX_PATH - 1
// bytes read.
#define PATH_TRUNCATED 0x8000

#define AT_FDCWD_VAL -100
#define O_WRONLY_VAL 01
#define O_CREAT_VAL 0100
#define O_TRUNC_VAL 01000

#define KEEP_FLAG 0x80

#define KIND_SYSCALL 0
#define KIND_EXEC 1
#define KIND_EXIT 2
#define KIND_FORK 3

// sluice syscall ids: arch-independent, the values of traced[].
enum {
	SC_NONE = 0,
	SC_OPEN, SC_OPENAT, SC_OPENAT2, SC_CREAT,
	SC_READ, SC_WRITE, SC_PREAD64, SC_PWRITE64, SC_READV, SC_WRITEV,
	SC_PREADV, SC_PWRITEV, SC_PREADV2, SC_PWRITEV2,
	SC_CLOSE, SC_CLOSE_RANGE, SC_DUP, SC_DUP2, SC_DUP3, SC_FCNTL,
	SC_FSYNC, SC_FDATASYNC, SC_SYNC_FILE_RANGE,
	SC_LSEEK, SC_STAT, SC_LSTAT, SC_FSTAT, SC_NEWFSTATAT, SC_STATX, SC_GETDENTS64,
	SC_UNLINK, SC_UNLINKAT, SC_RENAME, SC_RENAMEAT, SC_RENAMEAT2,
	SC_MKDIR, SC_MKDIRAT, SC_RMDIR, SC_TRUNCATE, SC_FTRUNCATE,
	SC_SENDFILE, SC_COPY_FILE_RANGE, SC_SPLICE,
	SC_IO_URING_ENTER,
	SC_CHDIR, SC_FCHDIR,
	// Calls that make fds without a path: the fd table names them as
	// /proc/PID/fd does (pipe:[ino], socket:[ino], anon_inode:[eventfd]).
	SC_PIPE, SC_PIPE2, SC_SOCKET, SC_SOCKETPAIR, SC_ACCEPT, SC_ACCEPT4,
	SC_EVENTFD, SC_EVENTFD2, SC_EPOLL_CREATE, SC_EPOLL_CREATE1, SC_MEMFD_CREATE,
	SC_SIGNALFD, SC_SIGNALFD4, SC_TIMERFD_CREATE, SC_INOTIFY_INIT, SC_INOTIFY_INIT1,
	SC_USERFAULTFD, SC_PIDFD_OPEN,
	SC_COUNT,
};

// One completed syscall (or a process exec/exit). Paths follow the fixed
// header back to back: path_len bytes of the first path, then path2_len of
// the second (both without PATH_TRUNCATED); neither is NUL-terminated.
struct record {
	u64 ts;       // enter time, CLOCK_MONOTONIC ns
	u64 duration; // ns
	u64 gap;      // ns since this thread's previous traced syscall ended; 0 unknown
	s64 ret;
	u64 cgroup;
	u64 flags;
	u32 pid;
	u32 tid;
	s32 fd;
	s32 fd2;
	// Inode numbers of the new fds of pipe, pipe2, socket, socketpair,
	// accept and accept4 (pipefs and sockfs number inodes in 32 bits).
	u32 ino;
	u32 ino2;
	u16 sc;
	u16 path_len;
	u16 path2_len;
	u16 kind;
	char comm[TASK_COMM_LEN];
	char paths[2 * MAX_PATH];
};

#define RECORD_HEADER 96
