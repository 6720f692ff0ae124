package tracer

import (
	"fmt"
	"strings"
)

// Syscall is sluice's arch-independent id of a traced syscall: the value
// the kernel program stores in a record (the SC_* enum of bpf/iotrace.h,
// in the same order).
type Syscall uint16

// Traced syscalls; keep in the order of the SC_* enum.
const (
	SysNone Syscall = iota
	SysOpen
	SysOpenat
	SysOpenat2
	SysCreat
	SysRead
	SysWrite
	SysPread64
	SysPwrite64
	SysReadv
	SysWritev
	SysPreadv
	SysPwritev
	SysPreadv2
	SysPwritev2
	SysClose
	SysCloseRange
	SysDup
	SysDup2
	SysDup3
	SysFcntl
	SysFsync
	SysFdatasync
	SysSyncFileRange
	SysLseek
	SysStat
	SysLstat
	SysFstat
	SysNewfstatat
	SysStatx
	SysGetdents64
	SysUnlink
	SysUnlinkat
	SysRename
	SysRenameat
	SysRenameat2
	SysMkdir
	SysMkdirat
	SysRmdir
	SysTruncate
	SysFtruncate
	SysSendfile
	SysCopyFileRange
	SysSplice
	SysIoUringEnter
	SysChdir
	SysFchdir
	SysPipe
	SysPipe2
	SysSocket
	SysSocketpair
	SysAccept
	SysAccept4
	SysEventfd
	SysEventfd2
	SysEpollCreate
	SysEpollCreate1
	SysMemfdCreate
	SysSignalfd
	SysSignalfd4
	SysTimerfdCreate
	SysInotifyInit
	SysInotifyInit1
	SysUserfaultfd
	SysPidfdOpen
	NumSyscalls
)

// Pseudo syscalls for process events; never in a batch.
const (
	kindSyscall = 0
	kindExec    = 1
	kindExit    = 2
	kindFork    = 3 // pid is the parent, tid the child process
)

var syscallNames = [NumSyscalls]string{
	SysNone: "", SysOpen: "open", SysOpenat: "openat", SysOpenat2: "openat2", SysCreat: "creat",
	SysRead: "read", SysWrite: "write", SysPread64: "pread64", SysPwrite64: "pwrite64",
	SysReadv: "readv", SysWritev: "writev", SysPreadv: "preadv", SysPwritev: "pwritev",
	SysPreadv2: "preadv2", SysPwritev2: "pwritev2",
	SysClose: "close", SysCloseRange: "close_range", SysDup: "dup", SysDup2: "dup2", SysDup3: "dup3",
	SysFcntl: "fcntl", SysFsync: "fsync", SysFdatasync: "fdatasync", SysSyncFileRange: "sync_file_range",
	SysLseek: "lseek", SysStat: "stat", SysLstat: "lstat", SysFstat: "fstat", SysNewfstatat: "newfstatat",
	SysStatx: "statx", SysGetdents64: "getdents64",
	SysUnlink: "unlink", SysUnlinkat: "unlinkat", SysRename: "rename", SysRenameat: "renameat",
	SysRenameat2: "renameat2", SysMkdir: "mkdir", SysMkdirat: "mkdirat", SysRmdir: "rmdir",
	SysTruncate: "truncate", SysFtruncate: "ftruncate",
	SysSendfile: "sendfile", SysCopyFileRange: "copy_file_range", SysSplice: "splice",
	SysIoUringEnter: "io_uring_enter",
	SysChdir:        "chdir", SysFchdir: "fchdir",
	SysPipe: "pipe", SysPipe2: "pipe2", SysSocket: "socket", SysSocketpair: "socketpair",
	SysAccept: "accept", SysAccept4: "accept4", SysEventfd: "eventfd", SysEventfd2: "eventfd2",
	SysEpollCreate: "epoll_create", SysEpollCreate1: "epoll_create1", SysMemfdCreate: "memfd_create",
	SysSignalfd: "signalfd", SysSignalfd4: "signalfd4", SysTimerfdCreate: "timerfd_create",
	SysInotifyInit: "inotify_init", SysInotifyInit1: "inotify_init1", SysUserfaultfd: "userfaultfd",
	SysPidfdOpen: "pidfd_open",
}

// String is the syscall's Linux name.
func (s Syscall) String() string {
	if s < NumSyscalls {
		return syscallNames[s]
	}
	return fmt.Sprintf("syscall(%d)", uint16(s))
}

// SyscallName is the name of syscall id s, for readers of io_events batches.
func SyscallName(s uint16) string { return Syscall(s).String() }

// class says what a syscall does to the fd table and how its bytes count.
type class uint8

const (
	clOther    class = iota
	clOpen           // returns a new fd for Path
	clRead           // ret > 0 is bytes read
	clWrite          // ret > 0 is bytes written
	clClose          // closes FD
	clDup            // ret is a copy of FD
	clDup2           // fd2 becomes a copy of FD (dup2, dup3)
	clFcntl          // F_DUPFD*, F_SETFD
	clRange          // close_range(FD, fd2, flags)
	clPath           // works on a path, no fd result (stat, unlink, mkdir, truncate)
	clRename         // path2 is the new path, path the old one
	clTransfer       // ret > 0 is bytes moved from FD to fd2
	clChdir          // sets the cwd that relative paths are joined to
	clNewFD          // returns (or fills in) new fds without a path: newFDName names them
)

var classes = [NumSyscalls]class{
	SysOpen: clOpen, SysOpenat: clOpen, SysOpenat2: clOpen, SysCreat: clOpen,
	SysRead: clRead, SysPread64: clRead, SysReadv: clRead, SysPreadv: clRead, SysPreadv2: clRead,
	SysWrite: clWrite, SysPwrite64: clWrite, SysWritev: clWrite, SysPwritev: clWrite, SysPwritev2: clWrite,
	SysClose: clClose, SysCloseRange: clRange, SysDup: clDup, SysDup2: clDup2, SysDup3: clDup2,
	SysFcntl: clFcntl,
	SysStat:  clPath, SysLstat: clPath, SysNewfstatat: clPath, SysStatx: clPath,
	SysUnlink: clPath, SysUnlinkat: clPath, SysMkdir: clPath, SysMkdirat: clPath, SysRmdir: clPath,
	SysTruncate: clPath,
	SysRename:   clRename, SysRenameat: clRename, SysRenameat2: clRename,
	SysSendfile: clTransfer, SysCopyFileRange: clTransfer, SysSplice: clTransfer,
	SysChdir: clChdir, SysFchdir: clChdir,
	SysPipe: clNewFD, SysPipe2: clNewFD, SysSocket: clNewFD, SysSocketpair: clNewFD,
	SysAccept: clNewFD, SysAccept4: clNewFD, SysEventfd: clNewFD, SysEventfd2: clNewFD,
	SysEpollCreate: clNewFD, SysEpollCreate1: clNewFD, SysMemfdCreate: clNewFD,
	SysSignalfd: clNewFD, SysSignalfd4: clNewFD, SysTimerfdCreate: clNewFD,
	SysInotifyInit: clNewFD, SysInotifyInit1: clNewFD, SysUserfaultfd: clNewFD, SysPidfdOpen: clNewFD,
}

// newFDGroup are the calls that make fds without a path (pipes, sockets,
// anonymous inodes); the fd table names their fds as /proc/PID/fd does.
var newFDGroup = []Syscall{
	SysPipe, SysPipe2, SysSocket, SysSocketpair, SysAccept, SysAccept4,
	SysEventfd, SysEventfd2, SysEpollCreate, SysEpollCreate1, SysMemfdCreate,
	SysSignalfd, SysSignalfd4, SysTimerfdCreate, SysInotifyInit, SysInotifyInit1,
	SysUserfaultfd, SysPidfdOpen,
}

// syscallGroups are names --syscalls accepts for several syscalls at once.
var syscallGroups = map[string][]Syscall{
	"all":   nil, // filled in init
	"open":  {SysOpen, SysOpenat, SysOpenat2, SysCreat},
	"read":  {SysRead, SysPread64, SysReadv, SysPreadv, SysPreadv2},
	"write": {SysWrite, SysPwrite64, SysWritev, SysPwritev, SysPwritev2},
	"sync":  {SysFsync, SysFdatasync, SysSyncFileRange},
	"stat":  {SysStat, SysLstat, SysFstat, SysNewfstatat, SysStatx},
	"fd":    {SysClose, SysCloseRange, SysDup, SysDup2, SysDup3, SysFcntl},
	"newfd": newFDGroup,
	"meta":  {SysUnlink, SysUnlinkat, SysRename, SysRenameat, SysRenameat2, SysMkdir, SysMkdirat, SysRmdir, SysTruncate, SysFtruncate, SysChdir, SysFchdir},
}

func init() {
	all := make([]Syscall, 0, NumSyscalls-1)
	for s := Syscall(1); s < NumSyscalls; s++ {
		all = append(all, s)
	}
	syscallGroups["all"] = all
}

// fdBookkeeping are the syscalls the fd table needs even when the user
// traces fewer: without them a path would go stale (a closed and reused
// fd). They are traced always and dropped in user space when not asked for.
var fdBookkeeping = append([]Syscall{SysOpen, SysOpenat, SysOpenat2, SysCreat, SysClose, SysCloseRange, SysDup, SysDup2, SysDup3, SysFcntl, SysChdir, SysFchdir}, newFDGroup...)

// SyscallSet is a set of traced syscalls.
type SyscallSet [NumSyscalls]bool

// ParseSyscalls parses a comma-separated list of syscall names and group
// names (all, open, read, write, sync, stat, fd, newfd, meta). The empty string
// is all of them; "preadv" also selects preadv2, and so on for the
// versioned variants (pwritev2, dup3, renameat2 stay separate names too).
func ParseSyscalls(spec string) (SyscallSet, error) {
	var set SyscallSet
	spec = strings.TrimSpace(spec)
	if spec == "" {
		spec = "all"
	}
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if g, ok := syscallGroups[name]; ok {
			for _, s := range g {
				set[s] = true
			}
			continue
		}
		found := false
		for s := Syscall(1); s < NumSyscalls; s++ {
			if syscallNames[s] == name {
				set[s], found = true, true
			}
		}
		if !found {
			return set, fmt.Errorf("unknown syscall %q in --syscalls (known: %s and the groups all, open, read, write, sync, stat, fd, newfd, meta)", name, strings.Join(syscallNames[1:], ", "))
		}
	}
	return set, nil
}

// Names lists the set's syscall names.
func (s *SyscallSet) Names() []string {
	var out []string
	for i, on := range s {
		if on {
			out = append(out, syscallNames[i])
		}
	}
	return out
}
