//go:build linux && amd64

package tracer

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	opts  Options
	objs  iotraceObjects
	links []link.Link
	rd    *ringbuf.Reader
	dec   *Decoder
}

// Open checks the machine, loads the kernel program with opts' filters and
// attaches it. Errors name what is missing (privileges, BTF, kernel
// features) rather than a raw errno.
func Open(opts Options) (*Tracer, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := quickCheck(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("tracer: lift the memlock limit: %w", err)
	}
	spec, err := loadIotrace()
	if err != nil {
		return nil, fmt.Errorf("tracer: %w", err)
	}
	var table [maxSyscallNr]uint8
	for s := Syscall(1); s < NumSyscalls; s++ {
		nr := syscallNumbers[s]
		want := opts.Syscalls[s] || opts.Syscalls == (SyscallSet{})
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
			return nil, fmt.Errorf("tracer: kernel program lacks variable %q", s.name)
		}
		if err := v.Set(s.val); err != nil {
			return nil, fmt.Errorf("tracer: set %s: %w", s.name, err)
		}
	}
	spec.Maps["events"].MaxEntries = uint32(opts.RingBytes)

	t := &Tracer{opts: opts}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("tracer: the kernel's verifier rejected the program (kernel %s): %+v", kernelRelease(), ve)
		}
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("tracer: loading the BPF program was refused: %w (needs root, or CAP_BPF and CAP_PERFMON; see sluice trace --check)", err)
		}
		return nil, fmt.Errorf("tracer: load the BPF program: %w", err)
	}
	for _, a := range []struct {
		tp   string
		prog *ebpf.Program
	}{
		{"sys_enter", t.objs.SysEnter},
		{"sys_exit", t.objs.SysExit},
		{"sched_process_exec", t.objs.ProcessExec},
		{"sched_process_fork", t.objs.ProcessFork},
		{"sched_process_exit", t.objs.ProcessExit},
	} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: a.tp, Program: a.prog})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("tracer: attach raw tracepoint %s: %w", a.tp, err)
		}
		t.links = append(t.links, l)
	}
	t.rd, err = ringbuf.NewReader(t.objs.Events)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("tracer: open the ring buffer: %w", err)
	}
	t.dec = NewDecoder(DecoderOptions{
		Syscalls:    opts.Syscalls,
		PathPrefix:  opts.PathPrefix,
		MinDuration: int64(opts.MinDuration),
		ClockOffset: clockOffset(),
	})
	// After attaching: an fd opened from here on is seen by the program.
	switch {
	case opts.PID != 0:
		t.dec.Preload(opts.PID)
	case opts.TID == 0:
		t.dec.PreloadAll(opts.Comm)
	default:
		t.dec.PreloadAll("")
	}
	return t, nil
}

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
	if err := t.objs.Lost.Lookup(uint32(0), &per); err != nil {
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
		if ctx.Err() != nil {
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
	return t.objs.Close()
}
