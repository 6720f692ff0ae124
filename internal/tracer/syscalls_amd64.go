package tracer

// syscallNumbers maps each traced syscall to its x86_64 number.
var syscallNumbers = [NumSyscalls]int{
	SysRead: 0, SysWrite: 1, SysOpen: 2, SysClose: 3, SysStat: 4, SysFstat: 5, SysLstat: 6,
	SysLseek: 8, SysPread64: 17, SysPwrite64: 18, SysReadv: 19, SysWritev: 20,
	SysDup: 32, SysDup2: 33, SysSendfile: 40, SysFcntl: 72, SysFsync: 74, SysFdatasync: 75,
	SysTruncate: 76, SysFtruncate: 77, SysRename: 82, SysMkdir: 83, SysRmdir: 84, SysCreat: 85,
	SysUnlink: 87, SysGetdents64: 217, SysOpenat: 257, SysMkdirat: 258, SysNewfstatat: 262,
	SysUnlinkat: 263, SysRenameat: 264, SysSplice: 275, SysSyncFileRange: 277, SysDup3: 292,
	SysPreadv: 295, SysPwritev: 296, SysCopyFileRange: 326, SysPreadv2: 327, SysPwritev2: 328,
	SysRenameat2: 316, SysStatx: 332, SysIoUringEnter: 426, SysCloseRange: 436, SysOpenat2: 437,
	SysChdir: 80, SysFchdir: 81,
	SysPipe: 22, SysPipe2: 293, SysSocket: 41, SysSocketpair: 53, SysAccept: 43, SysAccept4: 288,
	SysEventfd: 284, SysEventfd2: 290, SysEpollCreate: 213, SysEpollCreate1: 291, SysMemfdCreate: 319,
	SysSignalfd: 282, SysSignalfd4: 289, SysTimerfdCreate: 283, SysInotifyInit: 253, SysInotifyInit1: 294,
	SysUserfaultfd: 323, SysPidfdOpen: 434,
}

// syscallFunc is the kernel function of each traced syscall's table entry,
// which fentry mode attaches to: the syscall's name after the prefix,
// except where x86_64's table points at a newer variant.
func syscallFunc(s Syscall) string {
	name := s.String()
	switch s {
	case SysStat, SysLstat, SysFstat:
		name = "new" + name
	case SysSendfile:
		name = "sendfile64"
	}
	return "__x64_sys_" + name
}
