package e2e

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

var sluiceBin string

func TestMain(m *testing.M) {
	if os.Getenv(replayTarget) != "" || os.Getenv("SLUICE_BENCH_RELAY_TARGET") != "" || os.Getenv("SLUICE_BENCH_RELAY_SINK") != "" {
		// Only a load generator or the relay benchmark's sink runs; it
		// needs no sluice binary (a link per run took seconds of CPU and
		// 140 MB of disk next to the relays measured).
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		panic(err)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	root, err := corpustest.ModuleRoot()
	if err != nil {
		panic(err)
	}
	args := []string{"build", "-o", sluiceBin}
	if os.Getenv("SLUICE_E2E_RACE") == "1" {
		// make race: the binary under test is built with the race
		// detector, which makes a process that raced exit 66.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/sluice")...)
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		panic("build sluice: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sluice %v: %v", args, err)
	}
	return result{out.String(), errOut.String(), code}
}

func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		corpustest.Missing(t, "SLUICE_PYTHON (a Python with tests/requirements.txt installed)")
	}
	return py
}

func crosscheck(t *testing.T, lake string, args ...string) string {
	t.Helper()
	root, _ := corpustest.ModuleRoot()
	cmd := exec.Command(python(t), append([]string{filepath.Join(root, "tests", "crosscheck", "crosscheck.py"), "--lake", lake}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("crosscheck failed: %v\n%s", err, out)
	}
	return string(out)
}

// TestIngestCorpus ingests every corpus file and checks, with independent
// readers, that every record is in the lake with its values and attributes.
func TestIngestCorpus(t *testing.T) {
	corpus := filepath.Join(corpustest.Dir(t), "otlp")
	lake := t.TempDir()
	r := run(t, "ingest", "--lake", lake, "--progress", "never", corpus)
	if r.code != 0 {
		t.Fatalf("ingest exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "6901 logs, 112934 data points, 1559 spans") {
		t.Errorf("summary does not report the corpus counts:\n%s", r.stdout)
	}
	out := crosscheck(t, lake, "--expect", "logs=6901", "--expect", "metrics=112934", "--expect", "traces=1559", corpus)
	t.Log(out)

	// No temporary files may be left in the lake.
	filepath.WalkDir(lake, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".parquet") && !strings.HasPrefix(d.Name(), "catalog.db") && d.Name() != "_run.lock" {
			t.Errorf("unexpected file left in the lake: %s", p)
		}
		return nil
	})

	// The catalog lists every file; rebuilding it from the files alone
	// gives the same listing.
	before := run(t, "lake", "ls", "--lake", lake)
	if before.code != 0 || !strings.Contains(before.stdout, "logs") {
		t.Fatalf("lake ls: exit %d\n%s%s", before.code, before.stdout, before.stderr)
	}
	assertTotalRows(t, before.stdout, 6901+112934+1559)
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		os.Remove(filepath.Join(lake, f))
	}
	rb := run(t, "lake", "rebuild-catalog", "--lake", lake)
	if rb.code != 0 {
		t.Fatalf("rebuild-catalog exit %d\n%s%s", rb.code, rb.stdout, rb.stderr)
	}
	after := run(t, "lake", "ls", "--lake", lake)
	if after.stdout != before.stdout {
		t.Errorf("catalog after rebuild differs:\nbefore:\n%s\nafter:\n%s", before.stdout, after.stdout)
	}
}

// assertTotalRows checks the last line of `lake ls`, "N segments ... ROWS ...".
func assertTotalRows(t *testing.T, ls string, want int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(ls), "\n")
	last := strings.Fields(lines[len(lines)-1])
	if len(last) < 3 || last[1] != "segments" {
		t.Fatalf("unexpected lake ls footer %q", lines[len(lines)-1])
	}
	if last[2] != strconv.Itoa(want) {
		t.Errorf("lake ls total rows = %s, want %d", last[2], want)
	}
}

// TestIngestBadInput feeds one good file among bad ones: the bad ones are
// each reported by name with their problem, the run exits 1, and the lake
// holds exactly the good file's records and nothing partial.
func TestIngestBadInput(t *testing.T) {
	corpus := corpustest.Dir(t)
	good := filepath.Join(corpus, "otlp", "logs", "logs_160396104.binpb")
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(in, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("good.binpb", raw)
	bad := map[string][]byte{
		"truncated.binpb":  raw[:len(raw)/2],
		"random.binpb":     bytes.Repeat([]byte{0xff, 0x13, 0x77, 0x01}, 1000),
		"empty.binpb":      nil,
		"notes.json":       []byte("this is not json at all"),
		"wrongjson.json":   []byte(`{"hello": "world"}`),
		"badgzip.binpb.gz": []byte{0x1f, 0x8b, 0x08, 0x00, 0x01, 0x02},
		"image.pb":         append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 64)...),
	}
	for name, b := range bad {
		write(name, b)
	}
	lake := t.TempDir()
	r := run(t, "ingest", "--lake", lake, "--progress", "never", in)
	if r.code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for name := range bad {
		if !strings.Contains(r.stderr, filepath.Join(in, name)+":") {
			t.Errorf("stderr does not name %s:\n%s", name, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "525 logs") {
		t.Errorf("summary should count the good file's 525 logs:\n%s", r.stdout)
	}
	ls := run(t, "lake", "ls", "--lake", lake)
	assertTotalRows(t, ls.stdout, 525)
	crosscheck(t, lake, "--expect", "logs=525", good)
}

// TestIngestDetectsContent ingests a plain protobuf file with a name that
// says nothing: the signal is detected from the content, and the tenant
// lands in its own partition.
func TestIngestDetectsContent(t *testing.T) {
	corpus := corpustest.Dir(t)
	src := filepath.Join(corpus, "otlp", "traces", "traces_244872953.binpb.gz")
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	// A misleading name: the content decides.
	p := filepath.Join(in, "spans.dat")
	if err := os.WriteFile(p, plain, 0o644); err != nil {
		t.Fatal(err)
	}
	lake := t.TempDir()
	r := run(t, "ingest", "--lake", lake, "--tenant", "acme", "--progress", "always", p)
	if r.code != 0 {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "257 spans") {
		t.Errorf("want 257 spans in summary:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "1/1 files") {
		t.Errorf("--progress always printed no progress line:\n%q", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(lake, "traces", "tenant=acme")); err != nil {
		t.Errorf("tenant partition missing: %v", err)
	}
	crosscheck(t, lake, "--tenant", "acme", "--kind", "traces", "--expect", "traces=257", p)
}

// TestIngestJSONAndZstd ingests the same log records as OTLP JSON (two
// requests, one per line, as the Collector's file exporter writes them) and
// as zstd-compressed protobuf; both must give exactly the original records.
func TestIngestJSONAndZstd(t *testing.T) {
	good := filepath.Join(corpustest.Dir(t), "otlp", "logs", "logs_160396104.binpb")
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Split the request in two so the file holds two JSON lines.
	first, second := plog.NewLogs(), plog.NewLogs()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		dst := first
		if i >= rls.Len()/2 {
			dst = second
		}
		rls.At(i).CopyTo(dst.ResourceLogs().AppendEmpty())
	}
	var jsonl bytes.Buffer
	for _, part := range []plog.Logs{first, second} {
		b, err := (&plog.JSONMarshaler{}).MarshalLogs(part)
		if err != nil {
			t.Fatal(err)
		}
		jsonl.Write(b)
		jsonl.WriteByte('\n')
	}
	in := t.TempDir()
	jsonPath := filepath.Join(in, "logs.json")
	if err := os.WriteFile(jsonPath, jsonl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zstPath := filepath.Join(in, "logs.binpb.zst")
	if err := os.WriteFile(zstPath, enc.EncodeAll(raw, nil), 0o644); err != nil {
		t.Fatal(err)
	}

	lake := t.TempDir()
	for tenant, p := range map[string]string{"json": jsonPath, "zstd": zstPath} {
		r := run(t, "ingest", "--lake", lake, "--tenant", tenant, "--progress", "never", p)
		if r.code != 0 {
			t.Fatalf("ingest %s: exit %d\n%s%s", p, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "525 logs") {
			t.Errorf("ingest %s: want 525 logs:\n%s", p, r.stdout)
		}
		crosscheck(t, lake, "--tenant", tenant, "--expect", "logs=525", good)
	}
}
