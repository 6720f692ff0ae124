//go:build linux && amd64

package tracer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Supported reports whether this build has the kernel program.
const Supported = true

// Tracer is the loaded kernel program, its attachments and its ring
// buffer. Open it, Run it once, Close it.
type Tracer struct {
	opts     Options
	mode     AttachMode
	fallback error // why fentry mode was not used, in AttachAuto
	pairing  string
	attached int // syscalls with fentry/fexit programs
	coll     *ebpf.Collection
	lost     *ebpf.Map
	links    []link.Link
	rd       *ringbuf.Reader
	dec      *Decoder
	exited   bool // Run stopped because the StopOnExit process exited
}

// Open checks the machine, loads the kernel program with opts' filters and
// attaches it. Errors name what is missing (privileges, BTF, kernel
// features) rather than a raw errno.
func Open(opts Options) (*Tracer, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := quickCheck(); err != nil {
		return nil, err
	}
	tgid, err := checkTasks("/proc", opts.PID, opts.TID)
	if err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("tracer: lift the memlock limit: %w", err)
	}
	spec, err := loadIotrace()
	if err != nil {
		return nil, fmt.Errorf("tracer: %w", err)
	}
	table := syscallTable(opts.Syscalls)
	var tidTgid uint32
	if opts.TID != 0 {
		tidTgid = tgid
	}
	if err := setVariables(spec, opts, tidTgid, table); err != nil {
		return nil, err
	}
	spec.Maps["events"].MaxEntries = uint32(opts.RingBytes)

	t := &Tracer{opts: opts}
	switch opts.Attach {
	case AttachFentry:
		err = t.attachFentry(spec, table)
	case AttachTracepoint:
		err = t.attachTracepoints(spec)
	default:
		if err = t.attachFentry(spec.Copy(), table); err != nil {
			t.fallback = err
			t.Close()
			t = &Tracer{opts: opts, fallback: err}
			if err = t.attachTracepoints(spec); err != nil {
				err = fmt.Errorf("%w (and fentry mode failed first: %v)", err, t.fallback)
			}
		}
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	t.rd, err = ringbuf.NewReader(t.coll.Maps["events"])
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("tracer: open the ring buffer: %w", err)
	}
	t.dec = NewDecoder(DecoderOptions{
		Syscalls:    opts.Syscalls,
		PathPrefix:  opts.PathPrefix,
		PathGlob:    opts.PathGlob,
		TID:         opts.TID,
		Comm:        opts.Comm,
		MinDuration: int64(opts.MinDuration),
		ClockOffset: clockOffset(),
	})
	if opts.StopOnExit {
		t.dec.opts.WatchPID = opts.PID
	}
	// After attaching: an fd opened from here on is seen by the program.
	if tgid != 0 {
		t.dec.Preload(tgid)
	} else {
		t.dec.PreloadAll(opts.Comm)
	}
	if opts.Comm != "" {
		t.seedCommProcs()
	}
	return t, nil
}

// seedCommProcs enters the processes that already have a thread of the
// --comm name in the kernel's comm_procs, so that their other threads'
// fd table calls are traced from the start, not only once a thread of the
// name makes a traced call (the program adds those itself).
func (t *Tracer) seedCommProcs() {
	m := t.coll.Maps["comm_procs"]
	if m == nil {
		return
	}
	for _, pid := range procsWithComm("/proc", t.opts.Comm) {
		_ = m.Update(pid, uint8(1), ebpf.UpdateAny)
	}
}

// syscallTable is the kernel's traced[] table: for each syscall number,
// its Syscall id, with keepFlag for the fd table's bookkeeping calls;
// zero for a syscall that is not traced.
func syscallTable(set SyscallSet) [maxSyscallNr]uint8 {
	var table [maxSyscallNr]uint8
	for s := Syscall(1); s < NumSyscalls; s++ {
		nr := syscallNumbers[s]
		want := set[s] || set == (SyscallSet{})
		keep := false
		for _, b := range fdBookkeeping {
			keep = keep || b == s
		}
		switch {
		case keep:
			table[nr] = uint8(s) | keepFlag
		case want:
			table[nr] = uint8(s)
		}
	}
	return table
}

// setVariables writes opts' filters into the program's constants.
// tidTgid is the process of opts.TID: its other threads' fd table calls
// are traced too.
func setVariables(spec *ebpf.CollectionSpec, opts Options, tidTgid uint32, table [maxSyscallNr]uint8) error {
	var excludePID uint32
	if !opts.TraceSelf {
		excludePID = uint32(os.Getpid())
	}
	var comm [commLen]byte
	copy(comm[:], opts.Comm)
	sets := []struct {
		name string
		val  any
	}{
		{"filter_pid", opts.PID},
		{"exclude_pid", excludePID},
		{"filter_tid", opts.TID},
		{"filter_tid_tgid", tidTgid},
		{"filter_cgroup", opts.Cgroup},
		{"min_duration_ns", uint64(opts.MinDuration)},
		{"wakeup_bytes", uint64(min(opts.RingBytes/8, 512<<10))},
		{"filter_comm_len", uint8(len(opts.Comm))},
		{"filter_comm", comm},
		{"traced", table},
	}
	for _, s := range sets {
		v, ok := spec.Variables[s.name]
		if !ok {
			return fmt.Errorf("tracer: kernel program lacks variable %q", s.name)
		}
		if err := v.Set(s.val); err != nil {
			return fmt.Errorf("tracer: set %s: %w", s.name, err)
		}
	}
	return nil
}

// load loads the programs of spec named in progs (spec's others are left
// out) and the maps they use, except the named unused maps.
func (t *Tracer) load(spec *ebpf.CollectionSpec, fentry bool, progs map[string]*ebpf.ProgramSpec, unusedMaps ...string) error {
	spec.Programs = progs
	for _, m := range unusedMaps {
		delete(spec.Maps, m)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil && fentry {
		// Raw tracepoints loaded here means privileges are fine: a refusal
		// is the kernel's lack of BPF trampolines or tracing programs.
		if errors.Is(err, unix.EPERM) || errors.Is(err, ebpf.ErrNotSupported) {
			// cilium/ebpf blames MEMLOCK for any EPERM; raw tracepoints
			// loaded under the same limit, so that hint misleads here.
			return fmt.Errorf("tracer: fentry mode: kernel %s cannot load fentry/fexit programs (BPF_PROG_TYPE_TRACING): %w", kernelRelease(), explainFentry(err))
		}
		return fmt.Errorf("tracer: fentry mode: %w", err)
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("tracer: the kernel's verifier rejected the program (kernel %s): %+v", kernelRelease(), ve)
		}
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("tracer: loading the BPF program was refused: %w (needs root, or CAP_BPF and CAP_PERFMON; see sluice trace --check)", err)
		}
		return fmt.Errorf("tracer: load the BPF program: %w", err)
	}
	t.coll = coll
	t.lost = coll.Maps["lost"]
	return nil
}

// processEvents are the raw tracepoints both modes attach for the fd
// table: fork, exec and exit are rare, so they cost nothing measurable.
var processEvents = []struct{ tp, prog string }{
	{"sched_process_exec", "process_exec"},
	{"sched_process_fork", "process_fork"},
	{"sched_process_exit", "process_exit"},
}

func (t *Tracer) attachRawTracepoint(tp string, p *ebpf.Program) error {
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp, Program: p})
	if err != nil {
		return fmt.Errorf("tracer: attach raw tracepoint %s: %w", tp, err)
	}
	t.links = append(t.links, l)
	return nil
}

// attachFentry loads one copy of call_enter and call_exit per traced
// syscall, each attached to the syscall's kernel function, so untraced
// syscalls run no BPF at all; calls are paired in task storage.
func (t *Tracer) attachFentry(spec *ebpf.CollectionSpec, table [maxSyscallNr]uint8) error {
	progs := map[string]*ebpf.ProgramSpec{}
	for _, e := range processEvents {
		progs[e.prog] = spec.Programs[e.prog]
	}
	var calls []string
	for s := Syscall(1); s < NumSyscalls; s++ {
		if table[syscallNumbers[s]] == 0 {
			continue
		}
		for _, dir := range []string{"call_enter", "call_exit"} {
			p := spec.Programs[dir].Copy()
			p.AttachTo = syscallFunc(s)
			name := dir + "_" + s.String()
			progs[name] = p
			calls = append(calls, name)
		}
	}
	if err := t.load(spec, true, progs, "inflight"); err != nil {
		return err
	}
	t.mode, t.pairing, t.attached = AttachFentry, "task storage", len(calls)/2
	for _, name := range calls {
		l, err := link.AttachTracing(link.TracingOptions{Program: t.coll.Programs[name]})
		if err != nil {
			return fmt.Errorf("tracer: fentry mode: attach %s to %s: %w", name, progs[name].AttachTo, err)
		}
		t.links = append(t.links, l)
	}
	for _, e := range processEvents {
		if err := t.attachRawTracepoint(e.tp, t.coll.Programs[e.prog]); err != nil {
			return err
		}
	}
	return nil
}

// attachTracepoints is the fallback where the kernel lacks BPF trampolines:
// raw tracepoints on every syscall's enter and exit, paired in task
// storage, or in a hash keyed by thread id where raw tracepoint programs
// cannot use task storage (before Linux 6.x).
func (t *Tracer) attachTracepoints(spec *ebpf.CollectionSpec) error {
	var err error
	if !t.opts.hashPairing {
		if err = t.loadTracepoints(spec.Copy(), "sys_enter_task", "sys_exit_task", "process_exit", "inflight"); err == nil {
			t.pairing = "task storage"
		}
	}
	if t.opts.hashPairing || err != nil {
		if err = t.loadTracepoints(spec, "sys_enter", "sys_exit", "process_exit_hash", "task_inflight"); err != nil {
			return err
		}
		t.pairing = "hash by thread id"
	}
	t.mode = AttachTracepoint
	for _, tp := range []string{"sys_enter", "sys_exit"} {
		if err := t.attachRawTracepoint(tp, t.coll.Programs[tp]); err != nil {
			return err
		}
	}
	for _, e := range processEvents {
		if err := t.attachRawTracepoint(e.tp, t.coll.Programs[e.prog]); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tracer) loadTracepoints(spec *ebpf.CollectionSpec, enter, exit, processExit, unusedMap string) error {
	progs := map[string]*ebpf.ProgramSpec{
		"sys_enter":    spec.Programs[enter],
		"sys_exit":     spec.Programs[exit],
		"process_exec": spec.Programs["process_exec"],
		"process_fork": spec.Programs["process_fork"],
		"process_exit": spec.Programs[processExit],
	}
	return t.load(spec, false, progs, unusedMap)
}

// Attachment says how the program is attached and how it pairs enter and
// exit, for sluice trace's start-up line and --check.
func (t *Tracer) Attachment() string {
	switch t.mode {
	case AttachFentry:
		return fmt.Sprintf("fentry/fexit on %d syscalls' kernel functions, pairing in %s", t.attached, t.pairing)
	case AttachTracepoint:
		return "raw tracepoints sys_enter/sys_exit, pairing in " + t.pairing
	}
	return "not attached"
}

// Mode is how the program is attached: AttachFentry or AttachTracepoint.
func (t *Tracer) Mode() AttachMode { return t.mode }

// FallbackReason is why fentry mode was not used when Options.Attach was
// AttachAuto and the tracer fell back to raw tracepoints; nil otherwise.
func (t *Tracer) FallbackReason() error { return t.fallback }

// clockOffset is what turns the kernel's CLOCK_MONOTONIC times into Unix
// time: sampled once, so rows keep their relative order exactly.
func clockOffset() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Now().UnixNano() - ts.Nano()
}

// Lost is the number of records the kernel had no ring buffer room for.
func (t *Tracer) Lost() uint64 {
	var per []uint64
	if t.lost == nil {
		return 0
	}
	if err := t.lost.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// DecoderStats returns the user-space counters; call it from the goroutine
// that runs Run, or after Run returned.
func (t *Tracer) DecoderStats() DecoderStats { return t.dec.Stats() }

// Run reads the ring buffer until ctx is done, handing batches of rows to
// sink: when a batch reaches opts.BatchRows, and every opts.FlushEvery.
// The batch is reused after sink returns; sink must copy what it keeps.
// When ctx is done it detaches the probes, drains what is left in the
// ring buffer, hands over the last batch and returns.
func (t *Tracer) Run(ctx context.Context, sink func(*signal.IOEvents) error) error {
	batch := new(signal.IOEvents)
	flush := func() error {
		if batch.Len() == 0 {
			return nil
		}
		err := sink(batch)
		batch.Reset()
		return err
	}
	var rec ringbuf.Record
	draining := false
	next := time.Now().Add(t.opts.FlushEvery)
	t.rd.SetDeadline(next)
	for n := 0; ; n++ {
		err := t.rd.ReadInto(&rec)
		switch {
		case err == nil:
			t.dec.Decode(rec.RawSample, batch)
			if batch.Len() >= t.opts.BatchRows {
				if err := flush(); err != nil {
					return err
				}
			}
			// A ring that never runs dry never times out: look at the
			// clock every few thousand records instead.
			if n&4095 != 0 || draining || time.Now().Before(next) {
				continue
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
		default:
			return fmt.Errorf("tracer: read the ring buffer: %w", err)
		}
		if err := flush(); err != nil {
			return err
		}
		if draining {
			return nil
		}
		if ctx.Err() != nil || t.targetExited() {
			// Stop producing, then read what is already in the ring.
			t.detach()
			draining = true
			t.rd.SetDeadline(time.Now())
			continue
		}
		next = time.Now().Add(t.opts.FlushEvery)
		t.rd.SetDeadline(next)
	}
}

// explainFentry says why the kernel refused an fentry program, in terms a
// user can act on: raw tracepoints loaded with the same privileges, so it
// is the kernel's lack of (or policy against) BPF trampolines.
func explainFentry(err error) error {
	// cilium/ebpf blames MEMLOCK for any EPERM; memory is not the cause
	// here (kernels >= 5.11 charge BPF memory to the cgroup).
	msg := strings.Replace(err.Error(), " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)", "", 1)
	switch {
	case errors.Is(err, unix.EPERM):
		msg += "; EPERM with BPF privileges, before the verifier ran: the kernel refuses BPF trampolines here (a build or hypervisor policy, as in some VM sandboxes"
		if l := lockdownMode(); l != "" {
			msg += "; lockdown " + l
		}
		msg += ")"
	case errors.Is(err, ebpf.ErrNotSupported):
		msg += "; the kernel has no BPF trampoline for the function (needs CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS and an ftrace-patchable function)"
	}
	return errors.New(msg)
}

// lockdownMode is the kernel lockdown mode in force ("none", "integrity",
// "confidentiality"), "" when securityfs does not say.
func lockdownMode() string {
	b, err := os.ReadFile("/sys/kernel/security/lockdown")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return ""
}

// targetExited reports whether the target of a StopOnExit trace has
// exited. A thread (TID): it is gone from /proc or a zombie, looked up at
// each flush (the kernel program sends whole-process exits only). A
// process (PID): its exit record was decoded or, should the ring have had
// no room for that record, the process is gone.
func (t *Tracer) targetExited() bool {
	if !t.opts.StopOnExit {
		return false
	}
	switch {
	case t.opts.TID != 0:
		if !threadGone(t.dec.opts.ProcRoot, t.opts.TID) {
			return false
		}
	case t.opts.PID != 0:
		if !t.dec.Exited() && unix.Kill(int(t.opts.PID), 0) != unix.ESRCH {
			return false
		}
	default:
		return false
	}
	t.exited = true
	return true
}

// threadGone reports whether thread tid has ended: /proc has no such task,
// or it is a zombie (a thread group leader that ended before the others
// stays one until the whole group has).
func threadGone(procRoot string, tid uint32) bool {
	b, err := os.ReadFile(procRoot + "/" + strconv.FormatUint(uint64(tid), 10) + "/stat")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
	}
	// pid (comm) S ...: the state follows the last ')', as comm may hold one.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	st := b[i+2]
	return st == 'Z' || st == 'X' || st == 'x'
}

// TargetExited reports whether Run returned because the process or thread
// of a StopOnExit trace exited.
func (t *Tracer) TargetExited() bool { return t.exited }

func (t *Tracer) detach() {
	for _, l := range t.links {
		_ = l.Close()
	}
	t.links = nil
}

// Close detaches and unloads everything; it is safe to call twice.
func (t *Tracer) Close() error {
	t.detach()
	if t.rd != nil {
		_ = t.rd.Close()
		t.rd = nil
	}
	if t.coll != nil {
		t.coll.Close()
		t.coll = nil
	}
	return nil
}

// probeAttach loads and attaches a no-op fentry program to learn whether
// this kernel has BPF trampolines, which fentry mode needs.
func probeAttach() error {
	if err := rlimit.RemoveMemlock(); err != nil {
		return err
	}
	spec, err := loadIotrace()
	if err != nil {
		return err
	}
	// On a function fentry mode attaches to: a kernel can refuse some
	// functions and not others, with different errors.
	ps := spec.Programs["probe_fentry"]
	ps.AttachTo = syscallFunc(SysRead)
	p, err := ebpf.NewProgram(ps)
	if err != nil {
		return explainFentry(err)
	}
	defer p.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: p})
	if err != nil {
		return explainFentry(err)
	}
	return l.Close()
}
