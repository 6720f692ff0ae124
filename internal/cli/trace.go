package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	ossignal "os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/pipeline"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tenant"
	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tui"
)

// traceFlags are sluice trace's flags.
type traceFlags struct {
	check, headless bool
	pid, tid        uint32
	comm, cgroup    string
	syscalls        string
	minDuration     time.Duration
	pathPrefix      string
	pathGlob        string
	ringSize        string
	attach          string
	metricsAddr     string
	duration        time.Duration
	count           int64
	interval        time.Duration
	top             int
	sort            string

	out       string
	lf        lakeFlags
	toLake    bool
	tenant    string
	lakeFlush time.Duration
	folded    string
	weight    string
}

func newTraceCmd() *cobra.Command {
	var f traceFlags
	c := &cobra.Command{
		Use:   "trace [flags]",
		Short: "Trace file I/O syscalls with eBPF: live view, summaries, recordings",
		Long: `Trace the file I/O syscalls of this machine (or of one process, thread, comm or
cgroup) with eBPF: which processes do which I/O, on which paths, how long
each call takes.

Filters --pid, --tid, --comm, --cgroup, --syscalls and --min-duration run in
the kernel, so what they exclude never reaches sluice. --path-prefix and
--path-glob run first thing in user space. Opens, closes, dups and the calls
that make fds without a path (pipe, socket, accept, eventfd, ...: the newfd
group, named pipe:[ino], socket:[ino], anon_inode:[eventfd] as /proc shows them)
always reach sluice (they keep the fd -> path table right) and are dropped
there when not asked for.

By default a live view fills the terminal: top files, processes or syscalls
(tab) by a sort key (s), a latency histogram of the selected syscall, a
streaming tail (p pauses it), a filter editable live (/), and the lost and
filtered counters always in the header; q quits. A summary of the whole run
is printed when it ends.

--headless prints a summary every --interval: top syscalls, processes and
files by --sort (ops, bytes, time, p99, errors) with p50/p99 latency, and
the lost-record count; the final one ends with each top syscall's latency
histogram. A headless --pid trace ends when that process exits, a --tid
trace when that thread does; --duration
and --count (traced calls) end any trace. --metrics-addr serves the same counts as Prometheus metrics
(sluice_iotrace_*) while tracing. Records the kernel could not hand over (a full ring
buffer: raise --ring-size) are always counted and shown, never hidden.

--check reports what this machine supports (privileges, BTF, kernel, ring
buffer, attach mode, tracefs) and exits 1 naming what is missing.

--attach auto (the default) attaches fentry/fexit programs to the traced
syscalls' kernel functions where the kernel allows it, so untraced syscalls
pay nothing; elsewhere it falls back to the raw sys_enter/sys_exit
tracepoints, which every syscall of every task pays, and says why.

Needs root, or CAP_BPF and CAP_PERFMON, on Linux 5.8+ with BTF.`,
		Example: `  sluice trace --check
  sluice trace --headless --duration 30s
  sluice trace --headless --pid 1234 --syscalls read,write,fsync --min-duration 1ms`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if f.check {
				return runTraceCheck(c.OutOrStdout())
			}
			opts, err := f.options()
			if err != nil {
				return usageError{err}
			}
			sortKey, err := tracer.ParseSortKey(f.sort)
			if err != nil {
				return usageError{fmt.Errorf("--sort: %w", err)}
			}
			if _, err := tracer.ParseWeight(f.weight); err != nil {
				return usageError{fmt.Errorf("--weight: %w", err)}
			}
			if f.interval <= 0 || f.top <= 0 {
				return usageError{errors.New("--interval and --top must be positive")}
			}
			if f.count < 0 || f.duration < 0 {
				return usageError{errors.New("--count and --duration cannot be negative")}
			}
			// Headless, a --pid trace ends with its process and a --tid
			// trace with its thread, as strace -p does; the live view
			// stays open for reading.
			opts.StopOnExit = f.headless && (opts.PID != 0 || opts.TID != 0)
			return runTrace(c.Context(), c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr(), &f, opts, sortKey)
		},
	}
	fl := c.Flags()
	fl.BoolVar(&f.check, "check", false, "report what this machine supports and exit")
	fl.BoolVar(&f.headless, "headless", false, "print periodic summaries on stdout instead of the live view")
	fl.Uint32Var(&f.pid, "pid", 0, "trace only this process id (kernel filter)")
	fl.Uint32Var(&f.tid, "tid", 0, "trace only this thread id (kernel filter)")
	fl.StringVar(&f.comm, "comm", "", "trace only tasks with exactly this command name, at most 15 bytes (kernel filter)")
	fl.StringVar(&f.cgroup, "cgroup", "", "trace only this cgroup v2: a directory under /sys/fs/cgroup or a numeric id (kernel filter)")
	fl.StringVar(&f.syscalls, "syscalls", "all", "comma-separated syscalls or groups (all, open, read, write, sync, stat, fd, newfd, meta) (kernel filter)")
	fl.DurationVar(&f.minDuration, "min-duration", 0, "drop calls shorter than this (kernel filter)")
	fl.StringVar(&f.pathPrefix, "path-prefix", "", "keep only calls whose path (or a rename's old path) starts with this absolute prefix")
	fl.StringVar(&f.pathGlob, "path-glob", "", "keep only calls whose path (or a rename's old path) matches this absolute pattern: * ? [a-z] within a component, ** any number of components (/var/lib/**/*.db)")
	fl.StringVar(&f.ringSize, "ring-size", "64MiB", "kernel ring buffer size, a power of two (e.g. 16MiB, 256MiB)")
	fl.StringVar(&f.attach, "attach", "auto", "how to attach: fentry (only the traced syscalls pay), tracepoint (raw sys_enter/sys_exit: every syscall pays), or auto (fentry where the kernel can, else tracepoint)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve live I/O metrics (calls, bytes, errors, latency histogram per syscall, lost) on http://ADDR/metrics while tracing; port 0 picks one (printed)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until interrupted)")
	fl.Int64Var(&f.count, "count", 0, "stop after this many traced calls (after the filters); summaries and recordings hold exactly these")
	fl.DurationVar(&f.interval, "interval", 5*time.Second, "headless: time between summaries")
	fl.IntVar(&f.top, "top", 10, "rows per summary table")
	fl.StringVar(&f.sort, "sort", "ops", "sort summaries by ops, bytes, time, p99 or errors")
	fl.StringVar(&f.out, "out", "", "record every traced call into this Parquet file (the io_events schema)")
	fl.BoolVar(&f.toLake, "record", false, "record every traced call into the lake (--lake) as table io_events")
	f.lf.register(c)
	fl.StringVar(&f.tenant, "tenant", "default", "tenant of the recorded io_events rows")
	fl.DurationVar(&f.lakeFlush, "lake-flush", time.Minute, "with --record: commit a lake file at least this often")
	fl.StringVar(&f.folded, "folded", "", "write folded stacks (comm;syscall;path;components weight) to this file at the end, for flamegraph.pl, inferno or speedscope")
	fl.StringVar(&f.weight, "weight", "count", "--folded weight: count, duration (ns) or bytes")
	return c
}

func runTraceCheck(out io.Writer) error {
	r := tracer.Check()
	fmt.Fprint(out, r.String())
	if err := r.Err(); err != nil {
		return err
	}
	fmt.Fprintln(out, "sluice trace can run here.")
	return nil
}

// options turns the flags into tracer options.
func (f *traceFlags) options() (tracer.Options, error) {
	o := tracer.Options{PID: f.pid, TID: f.tid, Comm: f.comm, MinDuration: f.minDuration, PathPrefix: f.pathPrefix, PathGlob: f.pathGlob}
	var err error
	if o.Syscalls, err = tracer.ParseSyscalls(f.syscalls); err != nil {
		return o, fmt.Errorf("--syscalls: %w", err)
	}
	if o.Attach, err = tracer.ParseAttachMode(f.attach); err != nil {
		return o, fmt.Errorf("--attach: %w", err)
	}
	if o.RingBytes, err = parseSize(f.ringSize); err != nil {
		return o, fmt.Errorf("--ring-size: %w", err)
	}
	if o.RingBytes < 4096 || o.RingBytes&(o.RingBytes-1) != 0 {
		return o, fmt.Errorf("--ring-size %s: want a power of two of at least 4KiB", f.ringSize)
	}
	if len(f.comm) > 15 {
		return o, fmt.Errorf("--comm %q: the kernel keeps at most 15 bytes of a command name", f.comm)
	}
	if f.minDuration < 0 || f.duration < 0 {
		return o, errors.New("--min-duration and --duration must not be negative")
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	if f.cgroup != "" {
		if o.Cgroup, err = cgroupID(f.cgroup); err != nil {
			return o, fmt.Errorf("--cgroup: %w", err)
		}
	}
	return o, nil
}

// cgroupID is the id of a cgroup v2 given as an id or a directory: the
// directory's inode number is the id the kernel reports. Either must be
// a cgroup v2 directory that exists: any other filter would trace
// nothing and never say why.
func cgroupID(s string) (uint64, error) {
	cgroupRoot := tracer.Cgroup2Root()
	if id, err := strconv.ParseUint(s, 10, 64); err == nil {
		if id == 0 {
			return 0, errors.New("0 is no cgroup id")
		}
		found := false
		_ = filepath.WalkDir(cgroupRoot, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			var st syscall.Stat_t
			if syscall.Stat(p, &st) == nil && st.Ino == id {
				found = true
				return fs.SkipAll
			}
			return nil
		})
		if !found {
			return 0, fmt.Errorf("no cgroup v2 with id %d under %s", id, cgroupRoot)
		}
		return id, nil
	}
	dir := s
	if !strings.HasPrefix(dir, "/") {
		dir = cgroupRoot + "/" + dir
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(dir, &sfs); err != nil || sfs.Type != cgroup2Magic || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return 0, fmt.Errorf("%s is not a cgroup v2 directory (cgroup v2 is mounted at %s)", dir, cgroupRoot)
	}
	return st.Ino, nil
}

// cgroup2Magic is CGROUP2_SUPER_MAGIC, the file system type of cgroup v2.
const cgroup2Magic = 0x63677270

// parseSize parses 4096, 64k, 4KiB, 16M, 16MiB, 1G.
func parseSize(s string) (int, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := 1
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.Atoi(t)
	if err != nil || v <= 0 || v > (1<<31)/mult {
		return 0, fmt.Errorf("size %q: want a number with an optional K, M or G suffix", s)
	}
	return v * mult, nil
}

// traceSink is one consumer of traced batches.
type traceSink interface {
	write(b *signal.IOEvents) error
	close() error // completes the output
	abort()       // leaves no output: the trace did not start
}

// openTraceSinks opens the outputs the flags ask for.
func openTraceSinks(ctx context.Context, f *traceFlags) ([]traceSink, error) {
	var sinks []traceSink
	fail := func(err error) ([]traceSink, error) {
		for _, s := range sinks {
			s.abort()
		}
		return nil, err
	}
	if f.out != "" {
		s, err := newFileSink(f.out)
		if err != nil {
			return fail(fmt.Errorf("--out: %w", err))
		}
		sinks = append(sinks, s)
	}
	if f.folded != "" {
		w, _ := tracer.ParseWeight(f.weight) // checked with the flags
		tmp, err := createOutput(f.folded)
		if err != nil {
			return fail(fmt.Errorf("--folded: %w", err))
		}
		sinks = append(sinks, &foldedSink{path: f.folded, tmp: tmp, f: tracer.NewFolded(w)})
	}
	if f.toLake {
		s, err := newLakeSink(ctx, f)
		if err != nil {
			return fail(err)
		}
		sinks = append(sinks, s)
	}
	return sinks, nil
}

// createOutput creates the temporary file that becomes path when it is
// complete, in path's directory so that the rename is atomic.
func createOutput(path string) (*os.File, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("directory of %s: %w", path, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", path, err)
	}
	return tmp, nil
}

// commitOutput completes tmp and renames it to path; on failure it
// removes tmp.
func commitOutput(tmp *os.File, path string, err error) error {
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func abortOutput(tmp *os.File) {
	_ = tmp.Close()
	_ = os.Remove(tmp.Name())
}

func runTrace(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, f *traceFlags, opts tracer.Options, sortKey tracer.SortKey) error {
	live := !f.headless
	if live {
		if out, ok := stdout.(*os.File); !ok || !term.IsTerminal(int(out.Fd())) {
			return usageError{errors.New("the live view needs a terminal on stdout; use --headless for summaries")}
		}
	}
	// A hang-up (the terminal or ssh session went away) ends the trace like
	// SIGINT and SIGTERM do, with its recordings complete.
	ctx, stopHup := ossignal.NotifyContext(ctx, syscall.SIGHUP)
	defer stopHup()
	// A closed stdout (sluice trace --headless | head) ends the trace too:
	// SIGPIPE, which would kill the process and lose --out, is caught so
	// that the failed write says it.
	ctx, stdoutGone := context.WithCancel(ctx)
	defer stdoutGone()
	var stdoutErr error
	if f.headless {
		pipe := make(chan os.Signal, 1)
		ossignal.Notify(pipe, syscall.SIGPIPE)
		defer ossignal.Stop(pipe)
	}
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	// The outputs are opened first: a path that cannot be written fails
	// now, not when the trace ends with everything it recorded.
	sinks, err := openTraceSinks(ctx, f)
	if err != nil {
		return err
	}
	closeSinks := func() error {
		var errs []error
		for _, s := range sinks {
			errs = append(errs, s.close())
		}
		return errors.Join(errs...)
	}
	tr, err := tracer.Open(opts)
	if err != nil {
		for _, s := range sinks {
			s.abort()
		}
		return err
	}
	defer tr.Close()
	fmt.Fprintf(stderr, "sluice trace: attached with %s\n", tr.Attachment())
	iom := tracer.NewIOMetrics()
	iom.SetLost(tr.Lost)
	if f.metricsAddr != "" {
		stop, err := serveTraceMetrics(f.metricsAddr, iom, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	if r := tr.FallbackReason(); r != nil {
		fmt.Fprintf(stderr, "sluice trace: fentry mode unavailable, so every syscall of every task pays the tracepoints: %v\n", r)
	}

	var (
		mu     sync.Mutex
		sum    = tracer.NewSummary(time.Now())
		total  = tracer.NewSummary(time.Now())
		dstats tracer.DecoderStats
		feed   = tui.NewFeed(time.Now())
	)
	// --count: the batch that reaches it is cut there, and the trace stops.
	ctx, countReached := context.WithCancel(ctx)
	defer countReached()
	var counted int64
	cut := new(signal.IOEvents)
	sinkFn := func(b *signal.IOEvents) error {
		if f.count > 0 {
			left := f.count - counted
			if left <= 0 {
				return nil // drained after the stop: beyond the count
			}
			if int64(b.Len()) >= left {
				cut.Reset()
				cut.AppendRows(b, 0, int(left))
				b = cut
				countReached()
			}
			counted += int64(b.Len())
		}
		mu.Lock()
		dstats = tr.DecoderStats()
		if live {
			feed.Add(b, tr.Lost(), dstats.Filtered)
		} else {
			sum.Add(b)
		}
		total.Add(b)
		mu.Unlock()
		iom.Add(b)
		for _, s := range sinks {
			if err := s.write(b); err != nil {
				return err
			}
		}
		return nil
	}
	// The live view's title says how the kernel side is attached too.
	describe := describeTrace(opts) + ", attached by " + string(tr.Mode())

	// Every interval: a headless summary, or the live view's lost count
	// (which must move even when no batch arrives).
	every := f.interval
	if live {
		every = tui.RefreshEvery
	}
	stopTicker := make(chan struct{})
	tickerDone := make(chan struct{})
	go func() {
		defer close(tickerDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				mu.Lock()
				if live {
					feed.SetLost(tr.Lost())
				} else {
					if err := writeTraceReport(stdout, sum, tr.Lost(), dstats, sortKey, f.top, false); err != nil && stdoutErr == nil {
						stdoutErr = err
						stdoutGone()
					}
					sum = tracer.NewSummary(time.Now())
				}
				mu.Unlock()
			case <-stopTicker:
				return
			}
		}
	}()

	var runErr error
	if live {
		model := tui.NewTraceModel(feed, describe)
		model.Sort = sortKey
		p := tea.NewProgram(model, tea.WithContext(ctx), tea.WithInput(stdin), tea.WithOutput(stdout))
		trCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runErr = tr.Run(trCtx, sinkFn)
			feed.Finish(runErr)
			p.Quit()
		}()
		_, viewErr := p.Run()
		cancel()
		<-done
		if viewErr != nil && !errors.Is(viewErr, tea.ErrProgramKilled) && !errors.Is(viewErr, context.Canceled) &&
			!errors.Is(viewErr, context.DeadlineExceeded) && runErr == nil {
			runErr = fmt.Errorf("live view: %w", viewErr)
		}
	} else {
		fmt.Fprintf(stderr, "sluice trace: tracing (%s); interrupt to stop\n", describe)
		runErr = tr.Run(ctx, sinkFn)
	}
	close(stopTicker)
	<-tickerDone
	switch {
	case tr.TargetExited() && opts.TID != 0:
		fmt.Fprintf(stderr, "sluice trace: thread %d exited; stopping\n", opts.TID)
	case tr.TargetExited():
		fmt.Fprintf(stderr, "sluice trace: process %d exited; stopping\n", opts.PID)
	}
	sinkErr := closeSinks()
	mu.Lock()
	if stdoutErr == nil {
		_ = writeTraceReport(stdout, total, tr.Lost(), dstats, sortKey, f.top, true)
		if f.headless {
			writeTraceHistograms(stdout, total, iom, sortKey, f.top)
		}
	} else {
		fmt.Fprintf(stderr, "sluice trace: stopped: stdout closed (%v)\n", stdoutErr)
	}
	mu.Unlock()
	return errors.Join(runErr, sinkErr)
}

// fileSink records into one standalone Parquet file, written under a
// temporary name and renamed into place when complete.
type fileSink struct {
	path   string
	tmp    *os.File
	w      *lake.IOFile
	failed bool // a write failed and was reported: close removes the file
}

func newFileSink(path string) (*fileSink, error) {
	tmp, err := createOutput(path)
	if err != nil {
		return nil, err
	}
	return &fileSink{path: path, tmp: tmp, w: lake.NewIOFile(tmp, hostName())}, nil
}

func (s *fileSink) write(b *signal.IOEvents) error {
	if err := s.w.Write(b); err != nil {
		s.failed = true
		return fmt.Errorf("--out: write %s (nothing of it is kept): %w", s.path, err)
	}
	return nil
}

func (s *fileSink) close() error {
	if s.failed {
		abortOutput(s.tmp)
		return nil
	}
	return commitOutput(s.tmp, s.path, s.w.Close())
}

func (s *fileSink) abort() {
	_ = s.w.Close()
	abortOutput(s.tmp)
}

// foldedSink aggregates folded stacks and writes them when the trace ends.
type foldedSink struct {
	path string
	tmp  *os.File
	f    *tracer.Folded
}

func (s *foldedSink) write(b *signal.IOEvents) error {
	s.f.Add(b)
	return nil
}

func (s *foldedSink) close() error {
	_, err := s.f.WriteTo(s.tmp)
	return commitOutput(s.tmp, s.path, err)
}

func (s *foldedSink) abort() { abortOutput(s.tmp) }

// lakeSink records into the lake's io_events table, committing each file
// to the catalog.
type lakeSink struct {
	lock   io.Closer
	cat    *catalog.Catalog
	w      *lake.IOWriter
	tenant string
	every  time.Duration
	next   time.Time
}

func newLakeSink(ctx context.Context, f *traceFlags) (*lakeSink, error) {
	if !tenant.Valid(f.tenant) {
		return nil, usageError{fmt.Errorf("--tenant %q: want 1-64 of A-Z a-z 0-9 . _ -", f.tenant)}
	}
	if err := os.MkdirAll(f.lf.root, 0o755); err != nil {
		return nil, fmt.Errorf("lake root: %w", err)
	}
	lock, err := pipeline.LockLake(f.lf.root)
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Open(ctx, f.lf.catalogDSN())
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	// Commits use their own context: the last files are committed after
	// the trace's context ended.
	w, err := lake.NewIOWriter(lake.Options{Root: f.lf.root}, hostName(), func(seg lake.Segment) error {
		return cat.AddSegments(context.WithoutCancel(ctx), seg.CatalogRow())
	})
	if err != nil {
		cat.Close()
		lock.Close()
		return nil, err
	}
	return &lakeSink{lock: lock, cat: cat, w: w, tenant: f.tenant, every: f.lakeFlush, next: time.Now().Add(f.lakeFlush)}, nil
}

func (s *lakeSink) write(b *signal.IOEvents) error {
	if err := s.w.Write(s.tenant, b); err != nil {
		return err
	}
	if s.every > 0 && time.Now().After(s.next) {
		s.next = time.Now().Add(s.every)
		return s.w.Flush()
	}
	return nil
}

// abort closes the lake: nothing was written.
func (s *lakeSink) abort() { _ = s.close() }

func (s *lakeSink) close() error {
	err := s.w.Close()
	s.cat.Close()
	s.lock.Close()
	return err
}

func hostName() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

func describeTrace(o tracer.Options) string {
	var parts []string
	if o.PID != 0 {
		parts = append(parts, fmt.Sprintf("pid %d", o.PID))
	}
	if o.TID != 0 {
		parts = append(parts, fmt.Sprintf("tid %d", o.TID))
	}
	if o.Comm != "" {
		parts = append(parts, "comm "+o.Comm)
	}
	if o.Cgroup != 0 {
		parts = append(parts, fmt.Sprintf("cgroup %d", o.Cgroup))
	}
	if o.MinDuration > 0 {
		parts = append(parts, "min duration "+o.MinDuration.String())
	}
	if o.PathPrefix != "" {
		parts = append(parts, "paths starting "+o.PathPrefix)
	}
	if o.PathGlob != "" {
		parts = append(parts, "paths matching "+o.PathGlob)
	}
	if len(parts) == 0 {
		parts = append(parts, "all processes")
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(", ring %s", tracer.FormatBytes(int64(o.RingBytes)))
}

func writeTraceReport(out io.Writer, s *tracer.Summary, lost uint64, ds tracer.DecoderStats, by tracer.SortKey, top int, final bool) error {
	var b strings.Builder
	el := time.Since(s.Start)
	label := "interval"
	if final {
		label = "total"
	}
	rate := float64(s.Total.Ops) / max(el.Seconds(), 1e-9)
	fmt.Fprintf(&b, "== %s %s %s: %d calls (%.0f/s), %s, lost %d, filtered %d, /proc lookups %d\n",
		time.Now().UTC().Format(time.RFC3339), label, el.Round(time.Millisecond), s.Total.Ops, rate,
		tracer.FormatBytes(s.Total.Bytes), lost, ds.Filtered, ds.ProcLookups)
	if lost > 0 {
		fmt.Fprintf(&b, "!! %d records lost in the kernel (ring buffer full): raise --ring-size or narrow the filters\n", lost)
	}
	if ds.BadRecords > 0 {
		fmt.Fprintf(&b, "!! %d ring buffer records could not be decoded (a kernel program and sluice of different versions?)\n", ds.BadRecords)
	}
	tracer.WriteTable(&b, "syscalls by "+by.String(), s.TopSyscalls(by, top, ""), 18)
	tracer.WriteTable(&b, "processes by "+by.String(), s.TopProcs(by, top, ""), 24)
	tracer.WriteTable(&b, "files by "+by.String(), s.TopFiles(by, top, ""), 48)
	_, err := io.WriteString(out, b.String())
	return err
}

// serveTraceMetrics serves iom on http://addr/metrics until stop.
func serveTraceMetrics(addr string, iom *tracer.IOMetrics, stderr io.Writer) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(iom); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(stderr, "sluice trace: metrics on http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// writeTraceHistograms ends the final headless summary with the latency
// histogram of each top syscall.
func writeTraceHistograms(out io.Writer, s *tracer.Summary, iom *tracer.IOMetrics, by tracer.SortKey, top int) {
	stats, _ := iom.Snapshot()
	var names []string
	for _, a := range s.TopSyscalls(by, top, "") {
		names = append(names, a.Key)
	}
	var b strings.Builder
	tracer.WriteHistograms(&b, stats, names)
	_, _ = io.WriteString(out, b.String())
}
