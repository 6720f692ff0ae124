package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
)

func newStore(t *testing.T, srv *s3test.Server, prefix string, tweak func(*s3store.Config)) *s3store.Store {
	t.Helper()
	cfg := srv.Config(srv.Bucket(t))
	cfg.Prefix = prefix
	if tweak != nil {
		tweak(&cfg)
	}
	st, err := s3store.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func put(t *testing.T, st lake.Store, p string, data []byte) {
	t.Helper()
	w, err := st.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatalf("commit %s: %v", p, err)
	}
}

func readAll(t *testing.T, st lake.Store, p string) []byte {
	t.Helper()
	r, err := st.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return b
}

type walked struct {
	p    string
	size int64
}

func walk(t *testing.T, st lake.Store, prefix string) []walked {
	t.Helper()
	var out []walked
	if err := st.Walk(prefix, func(p string, size int64) error {
		out = append(out, walked{p, size})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	srv := s3test.Start(t)
	st := newStore(t, srv, "/lake/", nil)
	files := map[string][]byte{
		"logs/tenant=a/dt=2025-01-02/hour=03/x.parquet":    randomBytes(3<<20+17, 1), // several read blocks
		"logs/tenant=a/dt=2025-01-02/hour=04/y.parquet":    []byte("small"),
		"metrics/tenant=b/dt=2025-01-02/hour=03/z.parquet": {},
	}
	for p, b := range files {
		put(t, st, p, b)
	}
	for p, want := range files {
		if got := readAll(t, st, p); !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes, want %d (equal %v)", p, len(got), len(want), bytes.Equal(got, want))
		}
	}

	// ReadAt semantics: short read at the end is io.EOF, reads across blocks.
	p := "logs/tenant=a/dt=2025-01-02/hour=03/x.parquet"
	r, err := st.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	want := files[p]
	buf := make([]byte, 100)
	if n, err := r.ReadAt(buf, int64(len(want)-40)); n != 40 || err != io.EOF || !bytes.Equal(buf[:n], want[len(want)-40:]) {
		t.Errorf("read at end: %d, %v", n, err)
	}
	if n, err := r.ReadAt(buf, 1<<20-50); n != 100 || err != nil || !bytes.Equal(buf, want[1<<20-50:1<<20+50]) {
		t.Errorf("read across blocks: %d, %v", n, err)
	}
	if _, err := r.ReadAt(buf, int64(len(want))); err != io.EOF {
		t.Errorf("read past end: %v", err)
	}
	_ = r.Close()

	got := walk(t, st, "")
	wantWalk := []walked{
		{"logs/tenant=a/dt=2025-01-02/hour=03/x.parquet", int64(len(files["logs/tenant=a/dt=2025-01-02/hour=03/x.parquet"]))},
		{"logs/tenant=a/dt=2025-01-02/hour=04/y.parquet", 5},
		{"metrics/tenant=b/dt=2025-01-02/hour=03/z.parquet", 0},
	}
	if !slices.Equal(got, wantWalk) {
		t.Errorf("walk: %v", got)
	}
	if got := walk(t, st, "logs/tenant=a/dt=2025-01-02/hour=04"); len(got) != 1 || got[0].p != "logs/tenant=a/dt=2025-01-02/hour=04/y.parquet" {
		t.Errorf("walk with prefix: %v", got)
	}
	// The prefix is the lake root: keys outside it are not walked.
	ctx := context.Background()
	if _, err := st.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucketOf(st)), Key: aws.String("other/file.parquet"), Body: bytes.NewReader(nil)}); err != nil {
		t.Fatal(err)
	}
	if got := walk(t, st, ""); len(got) != 3 {
		t.Errorf("walk sees keys outside the prefix: %v", got)
	}
	if st.Key("a/b") != "lake/a/b" {
		t.Errorf("key %q", st.Key("a/b"))
	}

	for p := range files {
		if err := st.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Remove("logs/never/was.parquet"); err != nil {
		t.Errorf("removing a missing object: %v", err)
	}
	if got := walk(t, st, ""); len(got) != 0 {
		t.Errorf("after remove: %v", got)
	}
	if _, err := st.Open("logs/tenant=a/dt=2025-01-02/hour=04/y.parquet"); !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, s3store.ErrNotFound) || s3store.IsRetryable(err) {
		t.Errorf("open removed: %v", err)
	}
	for _, bad := range []string{"", "/abs", "../x", "a/../../b", "a//b"} {
		if _, err := st.Create(bad); err == nil {
			t.Errorf("Create(%q) accepted", bad)
		}
	}
}

func bucketOf(st *s3store.Store) string {
	s := st.String()[len("s3://"):]
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i]
		}
	}
	return s
}

// Nothing is visible before Commit, and Abort leaves nothing, neither an
// object nor an incomplete multipart upload.
func TestAbortLeavesNothing(t *testing.T) {
	srv := s3test.Start(t)
	st := newStore(t, srv, "", func(c *s3store.Config) { c.PartSize = s3store.MinPartSize })
	for _, size := range []int{10, 2*s3store.MinPartSize + 1} {
		w, err := st.Create("t/a.parquet")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(randomBytes(size, 2)); err != nil {
			t.Fatal(err)
		}
		if got := walk(t, st, ""); len(got) != 0 {
			t.Fatalf("visible before commit: %v", got)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if err := w.Abort(); err != nil {
			t.Errorf("second abort: %v", err)
		}
		if got := walk(t, st, ""); len(got) != 0 {
			t.Fatalf("size %d: visible after abort: %v", size, got)
		}
		if _, err := st.Open("t/a.parquet"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open after abort: %v", err)
		}
		if w.Commit() == nil {
			t.Error("commit after abort succeeded")
		}
	}
	ups, err := st.Client().ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucketOf(st))})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Errorf("%d multipart uploads left", len(ups.Uploads))
	}
}

func TestMultipart(t *testing.T) {
	srv := s3test.Start(t)
	st := newStore(t, srv, "lake", func(c *s3store.Config) { c.PartSize = s3store.MinPartSize; c.UploadConcurrency = 2 })
	data := randomBytes(3*s3store.MinPartSize+12345, 3) // four parts
	w, err := st.Create("logs/big.parquet")
	if err != nil {
		t.Fatal(err)
	}
	// Odd write sizes, as a bufio.Writer in front would not make them.
	for b := data; len(b) > 0; {
		n := min(len(b), 777_777)
		if _, err := w.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	if got := walk(t, st, ""); len(got) != 0 {
		t.Fatalf("visible before commit: %v", got)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	head, err := st.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucketOf(st)), Key: aws.String("lake/logs/big.parquet")})
	if err != nil {
		t.Fatal(err)
	}
	// A multipart ETag ends in -<parts>.
	if etag := aws.ToString(head.ETag); !bytes.HasSuffix([]byte(etag), []byte(`-4"`)) {
		t.Errorf("ETag %s: not a 4-part upload", etag)
	}
	if got := readAll(t, st, "logs/big.parquet"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d; equal %v", len(got), len(data), bytes.Equal(got, data))
	}
	// Exactly one part's worth is a single PUT.
	put(t, st, "logs/one.parquet", randomBytes(s3store.MinPartSize, 4))
	head, err = st.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucketOf(st)), Key: aws.String("lake/logs/one.parquet")})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains([]byte(aws.ToString(head.ETag)), []byte("-")) {
		t.Errorf("one part's worth went multipart: ETag %s", aws.ToString(head.ETag))
	}
}

// A committed object is never overwritten, whether the second write is a
// single PUT or a multipart upload, and the first content stays.
func TestNoOverwrite(t *testing.T) {
	srv := s3test.Start(t)
	st := newStore(t, srv, "", func(c *s3store.Config) { c.PartSize = s3store.MinPartSize })
	first := []byte("first")
	put(t, st, "t/x.parquet", first)
	for _, size := range []int{7, 2*s3store.MinPartSize + 3} {
		w, err := st.Create("t/x.parquet")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(randomBytes(size, 5)); err != nil {
			t.Fatal(err)
		}
		err = w.Commit()
		if !errors.Is(err, s3store.ErrExists) || !errors.Is(err, fs.ErrExist) || s3store.IsRetryable(err) {
			t.Fatalf("size %d: second commit: %v", size, err)
		}
		if got := readAll(t, st, "t/x.parquet"); !bytes.Equal(got, first) {
			t.Fatalf("size %d: object overwritten", size)
		}
	}
	ups, err := st.Client().ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucketOf(st))})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Errorf("the refused multipart upload was not aborted: %d left", len(ups.Uploads))
	}
}

func TestWalkPaginates(t *testing.T) {
	srv := s3test.Start(t)
	st := newStore(t, srv, "p", nil)
	// ListObjectsV2 pages hold up to 1000 keys.
	const n = 1005
	var want []string
	for i := range n {
		p := "t/tenant=a/dt=2025-01-01/hour=00/" + string(rune('a'+i%26)) + "-" + itoa(i) + ".parquet"
		want = append(want, p)
	}
	ctx := context.Background()
	for _, p := range want {
		if _, err := st.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucketOf(st)), Key: aws.String(st.Key(p)), Body: bytes.NewReader([]byte("x"))}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	var got []string
	for _, w := range walk(t, st, "t/") {
		got = append(got, w.p)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %d keys, want %d in order", len(got), len(want))
	}
	stop := errors.New("stop")
	if err := st.Walk("", func(string, int64) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("walk error: %v", err)
	}
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}

func TestNewChecks(t *testing.T) {
	ctx := context.Background()
	if _, err := s3store.New(ctx, s3store.Config{}); err == nil {
		t.Error("no bucket accepted")
	}
	if _, err := s3store.New(ctx, s3store.Config{Bucket: "b", PartSize: 1 << 20, AccessKeyID: "a", SecretAccessKey: "s"}); err == nil {
		t.Error("1MiB parts accepted")
	}
}
