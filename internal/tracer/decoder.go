package tracer

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Linux constants the fd table needs (the same on every architecture
// sluice builds the tracer for).
const (
	atFDCWD           = -100
	oCloexec          = 0o2000000
	fDupfd            = 0
	fSetfd            = 2
	fDupfdCloexec     = 1030
	fdCloexec         = 1
	closeRangeCloexec = 1 << 2
	atEmptyPath       = 0x1000
	mfdCloexec        = 1
)

// maxFDSlots bounds the per-process fd slice; larger fds go to a map.
const maxFDSlots = 1 << 16

// fdEntry is what the fd table knows about one open fd.
type fdEntry struct {
	path    string
	state   uint8 // fdUnknown, fdKnown (seen opened), fdProc (read from /proc)
	cloexec bool
	gen     uint64     // batch generation of str
	str     signal.Str // path, already in the batch of generation gen
}

const (
	fdUnknown uint8 = iota
	fdKnown
	fdProc
)

// proc is the fd table of one process.
type proc struct {
	fds   []fdEntry
	big   map[int32]*fdEntry // fds >= maxFDSlots
	cwd   string
	cwdOK bool

	comm    [commLen]byte
	commN   int
	commGen uint64
	commStr signal.Str
}

func (p *proc) entry(fd int32, grow bool) *fdEntry {
	if fd < 0 {
		return nil
	}
	if fd < maxFDSlots {
		if int(fd) >= len(p.fds) {
			if !grow {
				return nil
			}
			n := max(int(fd)+1, 2*len(p.fds), 16)
			p.fds = append(p.fds, make([]fdEntry, min(n, maxFDSlots)-len(p.fds))...)
		}
		return &p.fds[fd]
	}
	if e := p.big[fd]; e != nil || !grow {
		return e
	}
	if p.big == nil {
		p.big = make(map[int32]*fdEntry)
	}
	e := new(fdEntry)
	p.big[fd] = e
	return e
}

func (p *proc) drop(fd int32) {
	if e := p.entry(fd, false); e != nil {
		*e = fdEntry{}
	}
}

// DecoderStats counts what a Decoder did.
type DecoderStats struct {
	Records     int64 // ring buffer records decoded
	Rows        int64 // rows appended
	Filtered    int64 // records dropped by user-space filters (syscall set, path prefix, duration)
	ProcLookups int64 // lazy /proc/<pid>/fd readlinks of fds never seen
	Preloaded   int64 // fds read from /proc when tracing started
	Execs       int64
	Forks       int64
	Exits       int64 // process exits, each counted once however many of its threads report it
	BadRecords  int64
}

// DecoderOptions configure a Decoder.
type DecoderOptions struct {
	Syscalls    SyscallSet // rows kept; the zero set keeps all
	PathPrefix  string     // keep only rows whose path (or old path) starts with it
	PathGlob    string     // keep only rows whose path (or old path) matches it (matchGlob)
	TID         uint32     // keep only rows of this thread; its process's other threads send fd table calls
	Comm        string     // keep only rows of threads of this name; threads of other names beside them send fd table calls
	MinDuration int64      // ns; rows below it are dropped (bookkeeping calls bypass the kernel's check)
	ClockOffset int64      // added to the kernel's monotonic times to make Unix ns
	ProcRoot    string     // "/proc" by default
	WatchPID    uint32     // a process whose exit Exited reports
}

// Decoder turns ring buffer records into IOEvents rows: it resolves each
// fd to a path through a (pid, fd) table that follows opens, dups, fcntl,
// close, close_range, exec (CLOEXEC) and process exit. /proc/<pid>/fd is
// read only for an fd the table has never seen (opened before tracing, or
// by a call that is not traced), once, and the answer is cached.
//
// A Decoder is used by one goroutine at a time.
type Decoder struct {
	opts    DecoderOptions
	keep    SyscallSet
	procs   map[uint32]*proc
	last    *proc
	lastID  uint32
	intern  map[string]string // paths of opened files, shared between fds
	rec     rawRecord
	linkBuf []byte
	stats   DecoderStats
	// exited holds the last few pids whose exit was decoded. The kernel
	// sends a process's exit from each thread that finds the thread
	// group's live count at zero, and threads that exit together (an
	// exit_group) can all find it so: their repeats are not counted.
	exited        [8]uint32
	exitPos       int
	watchedExited bool
}

// NewDecoder returns a Decoder.
func NewDecoder(opts DecoderOptions) *Decoder {
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	d := &Decoder{opts: opts, procs: make(map[uint32]*proc), intern: make(map[string]string)}
	d.keep = opts.Syscalls
	if d.keep == (SyscallSet{}) {
		for i := range d.keep {
			d.keep[i] = true
		}
	}
	return d
}

// Exited reports whether the exit of DecoderOptions.WatchPID was decoded:
// the ring buffer holds nothing of that process after its exit.
func (d *Decoder) Exited() bool { return d.watchedExited }

// Stats returns the counters so far.
func (d *Decoder) Stats() DecoderStats { return d.stats }

func (d *Decoder) proc(pid uint32) *proc {
	if d.last != nil && d.lastID == pid {
		return d.last
	}
	p := d.procs[pid]
	if p == nil {
		p = &proc{}
		d.procs[pid] = p
	}
	d.last, d.lastID = p, pid
	return p
}

// internPath returns a string equal to b, shared with earlier opens of the
// same path; the map is bounded so a workload opening endless distinct
// names cannot grow it without end.
func (d *Decoder) internPath(b []byte) string {
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	if !utf8.Valid(b) { // a name read from /proc
		b = appendUTF8(nil, b)
	}
	if len(d.intern) >= 1<<16 {
		clear(d.intern)
	}
	s := string(b)
	d.intern[s] = s
	return s
}

// lookup returns the entry of fd, reading /proc for an fd never seen.
func (d *Decoder) lookup(pid uint32, p *proc, fd int32) *fdEntry {
	e := p.entry(fd, true)
	if e == nil || e.state != fdUnknown {
		return e
	}
	d.stats.ProcLookups++
	d.linkBuf = append(append(append(append(d.linkBuf[:0], d.opts.ProcRoot...), '/'), strconv.FormatUint(uint64(pid), 10)...), "/fd/"...)
	d.linkBuf = strconv.AppendInt(d.linkBuf, int64(fd), 10)
	if target, err := os.Readlink(string(d.linkBuf)); err == nil {
		e.path = d.internPath([]byte(target))
	}
	e.state = fdProc
	return e
}

// Preload reads the open fds and the cwd of pid from /proc, once, when
// tracing starts: an fd opened before tracing is then known even if the
// process has exited by the time its records are decoded.
func (d *Decoder) Preload(pid uint32) {
	p := d.proc(pid)
	dir := d.opts.ProcRoot + "/" + strconv.FormatUint(uint64(pid), 10)
	ents, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return
	}
	for _, de := range ents {
		fd, err := strconv.ParseInt(de.Name(), 10, 32)
		if err != nil {
			continue
		}
		e := p.entry(int32(fd), true)
		if e == nil || e.state != fdUnknown {
			continue
		}
		if target, err := os.Readlink(dir + "/fd/" + de.Name()); err == nil {
			e.path = d.internPath([]byte(target))
			e.state = fdProc
			d.stats.Preloaded++
		}
	}
	d.cwd(pid, p)
}

// PreloadAll preloads every process, or with comm every process one of
// whose threads has that comm.
func (d *Decoder) PreloadAll(comm string) {
	for _, pid := range procsWithComm(d.opts.ProcRoot, comm) {
		d.Preload(pid)
	}
}

// procsWithComm lists the processes under procRoot one of whose threads
// is named comm ("": every process).
func procsWithComm(procRoot, comm string) []uint32 {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	var pids []uint32
	for _, de := range ents {
		pid, err := strconv.ParseUint(de.Name(), 10, 32)
		if err != nil {
			continue
		}
		if comm == "" || threadNamed(procRoot+"/"+de.Name(), comm) {
			pids = append(pids, uint32(pid))
		}
	}
	return pids
}

// threadNamed reports whether a thread of the process at dir is named comm.
func threadNamed(dir, comm string) bool {
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/task/" + task.Name() + "/comm")
		if err == nil && strings.TrimSuffix(string(b), "\n") == comm {
			return true
		}
	}
	return false
}

func (d *Decoder) cwd(pid uint32, p *proc) string {
	if !p.cwdOK {
		d.linkBuf = append(append(append(d.linkBuf[:0], d.opts.ProcRoot...), '/'), strconv.FormatUint(uint64(pid), 10)...)
		d.linkBuf = append(d.linkBuf, "/cwd"...)
		cwd, _ := os.Readlink(string(d.linkBuf))
		p.cwd, p.cwdOK = utf8String(cwd), true
	}
	return p.cwd
}

// appendPath appends the path of a path argument to out's arena: absolute
// as is, relative joined to the directory of dirfd (or the cwd).
func (d *Decoder) appendPath(out *signal.IOEvents, pid uint32, p *proc, dirfd int32, rel []byte) signal.Str {
	if len(rel) == 0 {
		return 0
	}
	if rel[0] == '/' {
		return appendStrUTF8(out, rel)
	}
	var dir string
	if dirfd == atFDCWD {
		dir = d.cwd(pid, p)
	} else if e := d.lookup(pid, p, dirfd); e != nil {
		dir = e.path
	}
	if dir == "" {
		return appendStrUTF8(out, rel)
	}
	off := len(out.Buf)
	out.Buf = append(out.Buf, dir...)
	if dir[len(dir)-1] != '/' {
		out.Buf = append(out.Buf, '/')
	}
	for bytes.HasPrefix(rel, []byte("./")) {
		rel = rel[2:]
	}
	out.Buf = appendUTF8(out.Buf, rel)
	return signal.MakeStr(off, len(out.Buf)-off)
}

// argPath is appendPath for a path argument the kernel read: one that
// went on past what it read (ENAMETOOLONG) ends in "…".
func (d *Decoder) argPath(out *signal.IOEvents, pid uint32, p *proc, dirfd int32, rel []byte, truncated bool) signal.Str {
	s := d.appendPath(out, pid, p, dirfd, rel)
	if !truncated || s == 0 {
		return s
	}
	out.Buf = append(out.Buf, "…"...) // s ends the arena: appendPath appended it last
	return signal.MakeStr(s.Off(), s.Len()+len("…"))
}

// fdPath returns the Str of fd's path in out, appending it at most once per
// batch.
func (d *Decoder) fdPath(out *signal.IOEvents, pid uint32, p *proc, fd int32) signal.Str {
	e := d.lookup(pid, p, fd)
	if e == nil || e.path == "" {
		return 0
	}
	if e.gen != out.Gen() || e.str == 0 {
		e.str = out.AppendString(e.path)
		e.gen = out.Gen()
	}
	return e.str
}

func (d *Decoder) commStr(out *signal.IOEvents, p *proc, comm []byte) signal.Str {
	if p.commGen == out.Gen() && p.commStr != 0 && bytes.Equal(p.comm[:p.commN], comm) {
		return p.commStr
	}
	p.commN = copy(p.comm[:], comm)
	p.commGen = out.Gen()
	p.commStr = appendStrUTF8(out, comm)
	return p.commStr
}

// Decode decodes one ring buffer record into out (zero or one row).
func (d *Decoder) Decode(b []byte, out *signal.IOEvents) {
	r := &d.rec
	if err := parseRecord(b, r); err != nil {
		d.stats.BadRecords++
		return
	}
	d.stats.Records++
	switch r.kind {
	case kindExec:
		d.stats.Execs++
		p := d.proc(r.pid)
		for i := range p.fds {
			if e := &p.fds[i]; e.cloexec || e.state == fdProc {
				// CLOEXEC fds are gone; fds read from /proc may have
				// been CLOEXEC too, so they are read again if used.
				*e = fdEntry{}
			}
		}
		for fd, e := range p.big {
			if e.cloexec || e.state == fdProc {
				delete(p.big, fd)
			}
		}
		p.cwdOK = false
		return
	case kindFork:
		d.stats.Forks++
		d.fork(r.pid, r.tid)
		return
	case kindExit:
		if d.firstExit(r.pid) {
			d.stats.Exits++
		}
		if r.pid == d.opts.WatchPID && r.pid != 0 {
			d.watchedExited = true
		}
		delete(d.procs, r.pid)
		if d.lastID == r.pid {
			d.last = nil
		}
		return
	case kindSyscall:
	default:
		d.stats.BadRecords++
		return
	}
	sc := Syscall(r.sc)
	if sc == SysNone || sc >= NumSyscalls {
		d.stats.BadRecords++
		return
	}
	p := d.proc(r.pid)
	if out.SyscallNames == nil {
		out.SyscallNames = syscallNames[:]
	}
	ok := r.ret >= 0
	ev := signal.IOEvent{
		Time: r.ts + d.opts.ClockOffset, Duration: r.duration, Gap: r.gap,
		PID: r.pid, TID: r.tid, Syscall: uint16(sc), FD: r.fd, Ret: r.ret,
		Flags: r.flags, Cgroup: r.cgroup,
	}
	if !ok && r.ret >= -4095 {
		ev.Errno = int32(-r.ret)
	}
	switch classes[sc] {
	case clOpen:
		ev.Path = d.argPath(out, r.pid, p, r.fd, r.path, r.trunc1)
		ev.FD = -1
		if ok {
			ev.FD = int32(r.ret)
			if e := p.entry(ev.FD, true); e != nil {
				*e = fdEntry{path: d.internPath(out.StrBytes(ev.Path)), state: fdKnown, cloexec: r.flags&oCloexec != 0, gen: out.Gen(), str: ev.Path}
			}
		}
	case clRead, clWrite, clTransfer:
		ev.Path = d.fdPath(out, r.pid, p, r.fd)
		if ok {
			ev.Bytes = r.ret
		}
	case clClose:
		ev.Path = d.fdPath(out, r.pid, p, r.fd)
		p.drop(r.fd)
	case clDup:
		ev.Path = d.fdPath(out, r.pid, p, r.fd)
		if ok {
			d.copyFD(r.pid, p, r.fd, int32(r.ret), false)
		}
	case clDup2:
		ev.Path = d.fdPath(out, r.pid, p, r.fd)
		if ok && r.fd != r.fd2 {
			d.copyFD(r.pid, p, r.fd, r.fd2, r.flags&oCloexec != 0)
		}
	case clFcntl:
		ev.Path = d.fdPath(out, r.pid, p, r.fd)
		if ok {
			switch r.flags {
			case fDupfd, fDupfdCloexec:
				d.copyFD(r.pid, p, r.fd, int32(r.ret), r.flags == fDupfdCloexec)
			case fSetfd:
				if e := d.lookup(r.pid, p, r.fd); e != nil {
					e.cloexec = r.fd2&fdCloexec != 0
				}
			}
		}
	case clRange:
		if ok {
			d.closeRange(p, uint32(r.fd), uint32(r.fd2), r.flags)
		}
	case clPath:
		if len(r.path) == 0 && r.flags&atEmptyPath != 0 {
			// fstatat(fd, "", AT_EMPTY_PATH), glibc's fstat: the fd itself.
			ev.Path = d.fdPath(out, r.pid, p, r.fd)
		} else {
			ev.Path = d.argPath(out, r.pid, p, r.fd, r.path, r.trunc1)
		}
	case clChdir:
		if sc == SysChdir {
			ev.Path = d.argPath(out, r.pid, p, r.fd, r.path, r.trunc1)
		} else {
			ev.Path = d.fdPath(out, r.pid, p, r.fd)
		}
		if ok && ev.Path != 0 {
			p.cwd, p.cwdOK = d.internPath(out.StrBytes(ev.Path)), true
		}
	case clRename:
		ev.OldPath = d.argPath(out, r.pid, p, r.fd, r.path, r.trunc1)
		ev.Path = d.argPath(out, r.pid, p, r.fd2, r.path2, r.trunc2)
	case clNewFD:
		d.newFDs(out, &ev, r.pid, p, sc)
	default:
		ev.Path = d.fdPath(out, r.pid, p, r.fd)
	}
	if !d.keep[sc] || r.duration < d.opts.MinDuration || (d.opts.TID != 0 && r.tid != d.opts.TID) ||
		(d.opts.Comm != "" && string(r.comm) != d.opts.Comm) || !d.pathOK(out, &ev) {
		d.stats.Filtered++
		return
	}
	ev.Comm = d.commStr(out, p, r.comm)
	out.Append(&ev)
	d.stats.Rows++
}

// newFDs enters the fds a pipe, socket, accept, eventfd, ... call made in
// the fd table, named as /proc/PID/fd names them, and fills in the row: FD
// is the fd the call worked on (accept's listening socket, signalfd's fd)
// or else the first new fd, Path its name.
func (d *Decoder) newFDs(out *signal.IOEvents, ev *signal.IOEvent, pid uint32, p *proc, sc Syscall) {
	r := &d.rec
	ok := r.ret >= 0
	switch sc {
	case SysAccept, SysAccept4:
		ev.Path = d.fdPath(out, pid, p, r.fd)
		if ok {
			d.setNewFD(p, int32(r.ret), d.newFDName(sc, r.ino), r.flags&oCloexec != 0)
		}
		return
	case SysSignalfd, SysSignalfd4:
		if r.fd >= 0 && !ok {
			ev.Path = d.fdPath(out, pid, p, r.fd)
			return
		}
	}
	ev.FD = -1
	if !ok {
		return
	}
	cloexec := r.flags&oCloexec != 0
	switch sc {
	case SysMemfdCreate:
		cloexec = r.flags&mfdCloexec != 0
	case SysPidfdOpen:
		cloexec = true // pidfds are always close-on-exec
	}
	switch sc {
	case SysPipe, SysPipe2, SysSocketpair:
		ev.FD = r.fd
		d.setNewFD(p, r.fd, d.newFDName(sc, r.ino), cloexec)
		d.setNewFD(p, r.fd2, d.newFDName(sc, r.ino2), cloexec)
	default:
		ev.FD = int32(r.ret)
		d.setNewFD(p, ev.FD, d.newFDName(sc, r.ino), cloexec)
	}
	ev.Path = d.fdPath(out, pid, p, ev.FD)
}

// newFDName is the name /proc/PID/fd gives an fd that sc made: "" when the
// kernel could not read the inode number a pipe or socket is named by.
func (d *Decoder) newFDName(sc Syscall, ino uint32) string {
	var kind string
	switch sc {
	case SysPipe, SysPipe2:
		kind = "pipe:["
	case SysSocket, SysSocketpair, SysAccept, SysAccept4:
		kind = "socket:["
	case SysEventfd, SysEventfd2:
		return "anon_inode:[eventfd]"
	case SysEpollCreate, SysEpollCreate1:
		return "anon_inode:[eventpoll]"
	case SysSignalfd, SysSignalfd4:
		return "anon_inode:[signalfd]"
	case SysTimerfdCreate:
		return "anon_inode:[timerfd]"
	case SysInotifyInit, SysInotifyInit1:
		return "anon_inode:inotify"
	case SysUserfaultfd:
		return "anon_inode:[userfaultfd]"
	case SysPidfdOpen:
		return "anon_inode:[pidfd]"
	case SysMemfdCreate:
		if len(d.rec.path) == 0 {
			return ""
		}
		d.linkBuf = append(append(append(d.linkBuf[:0], "/memfd:"...), d.rec.path...), " (deleted)"...)
		return d.internPath(d.linkBuf)
	default:
		return ""
	}
	if ino == 0 {
		return ""
	}
	d.linkBuf = append(strconv.AppendUint(append(d.linkBuf[:0], kind...), uint64(ino), 10), ']')
	return d.internPath(d.linkBuf)
}

// setNewFD enters a new fd; without a name it is left to /proc.
func (d *Decoder) setNewFD(p *proc, fd int32, name string, cloexec bool) {
	e := p.entry(fd, true)
	if e == nil {
		return
	}
	if name == "" {
		*e = fdEntry{}
		return
	}
	*e = fdEntry{path: name, state: fdKnown, cloexec: cloexec}
}

// fork gives child a copy of parent's fd table and cwd, as the kernel did.
// firstExit reports whether pid's exit was not decoded recently, and
// remembers it.
func (d *Decoder) firstExit(pid uint32) bool {
	for _, p := range d.exited {
		if p == pid && pid != 0 {
			return false
		}
	}
	d.exited[d.exitPos] = pid
	d.exitPos = (d.exitPos + 1) % len(d.exited)
	return true
}

func (d *Decoder) fork(parent, child uint32) {
	// A new process may reuse a pid that exited recently.
	for i, p := range d.exited {
		if p == child {
			d.exited[i] = 0
		}
	}
	pp := d.procs[parent]
	if pp == nil {
		return
	}
	c := &proc{cwd: pp.cwd, cwdOK: pp.cwdOK}
	if len(pp.fds) > 0 {
		c.fds = make([]fdEntry, len(pp.fds))
		for i, e := range pp.fds {
			c.fds[i] = fdEntry{path: e.path, state: e.state, cloexec: e.cloexec}
		}
	}
	for fd, e := range pp.big {
		if c.big == nil {
			c.big = make(map[int32]*fdEntry)
		}
		c.big[fd] = &fdEntry{path: e.path, state: e.state, cloexec: e.cloexec}
	}
	d.procs[child] = c
	if d.lastID == child {
		d.last = nil
	}
}

// pathOK applies the path prefix and glob filters to a row: its path or
// old path must pass both.
func (d *Decoder) pathOK(out *signal.IOEvents, ev *signal.IOEvent) bool {
	pre, glob := d.opts.PathPrefix, d.opts.PathGlob
	if pre == "" && glob == "" {
		return true
	}
	for _, s := range [2]signal.Str{ev.Path, ev.OldPath} {
		p := out.String(s)
		if p != "" && strings.HasPrefix(p, pre) && (glob == "" || matchGlob(glob, p)) {
			return true
		}
	}
	return false
}

func (d *Decoder) copyFD(pid uint32, p *proc, from, to int32, cloexec bool) {
	src := d.lookup(pid, p, from)
	dst := p.entry(to, true)
	if dst == nil {
		return
	}
	if src == nil {
		*dst = fdEntry{}
		return
	}
	*dst = fdEntry{path: src.path, state: src.state, cloexec: cloexec}
	if dst.state == fdUnknown {
		dst.state = fdProc
	}
}

func (d *Decoder) closeRange(p *proc, first, last uint32, flags uint64) {
	// CLOSE_RANGE_UNSHARE unshares the table first and then closes: the
	// same effect for this process's view, so it needs no case of its own.
	upto := min(uint64(last), uint64(len(p.fds))-1)
	if len(p.fds) > 0 {
		for fd := uint64(first); fd <= upto; fd++ {
			if flags&closeRangeCloexec != 0 {
				p.fds[fd].cloexec = true
			} else {
				p.fds[fd] = fdEntry{}
			}
		}
	}
	for fd, e := range p.big {
		if uint32(fd) >= first && uint32(fd) <= last {
			if flags&closeRangeCloexec != 0 {
				e.cloexec = true
			} else {
				delete(p.big, fd)
			}
		}
	}
}
