package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
)

// s3Lake is a lake whose files are in a bucket of a real S3 server reached
// through a fault proxy, with its catalog in a local directory.
type s3Lake struct {
	srv    *s3test.Server
	proxy  *s3test.FaultProxy
	bucket string
	state  string
	// catalog is the catalog's DSN; "" is the SQLite file in state.
	catalog string
}

func (l *s3Lake) catalogDSN() string {
	if l.catalog != "" {
		return l.catalog
	}
	return "sqlite:" + filepath.Join(l.state, "catalog.db")
}

func (l *s3Lake) sluice(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := l.command(args...).CombinedOutput()
	return string(out), err
}

// command is a sluice command on the lake, not started.
func (l *s3Lake) command(args ...string) *exec.Cmd {
	s3args := []string{"--lake", l.state, "--s3-bucket", l.bucket, "--s3-prefix", "lake",
		"--s3-endpoint", l.proxy.Endpoint, "--s3-region", "us-east-1",
		// Two attempts: every fault still meets a retry (the proxy fails
		// a pattern of requests, not a request's every attempt), in a
		// fraction of the default's backoff.
		"--s3-max-retries", "2"}
	if l.catalog != "" {
		s3args = append(s3args, "--catalog", l.catalog)
	}
	cmd := exec.Command(sluiceBin, append(args, s3args...)...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+s3test.AccessKey, "AWS_SECRET_ACCESS_KEY="+s3test.SecretKey,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PROFILE=", "AWS_SESSION_TOKEN=")
	return cmd
}

// check asserts the lake's invariants under S3 faults: every live
// catalog segment is an object in the bucket (in place, or still staged
// or already in the trash, where sluice's readers look: catalog.Locations),
// the live segments hold want rows, and a glob over the bucket's Hive tree
// never counts fewer (every file it holds is a segment of the catalog,
// live or replaced, whose rows the catalog knows): a file that failed to
// leave the tree may be counted twice, never a row not at all. With
// exact, the Hive tree holds exactly the live files.
func (l *s3Lake) check(t *testing.T, stage string, want int64, exact bool) {

	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, l.catalogDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	all, err := cat.List(ctx, catalog.Filter{Table: "logs", IncludeReplaced: true})
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(l.srv.Dir, l.bucket, "lake")
	inBucket := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		return err == nil
	}
	rowsOf := map[string]int64{}
	live := map[string]bool{}
	var rows int64
	for _, s := range all {
		rowsOf[s.Path] = s.Rows
		if !s.ReplacedAt.IsZero() {
			continue
		}
		live[s.Path] = true
		rows += s.Rows
		found := false
		for _, loc := range catalog.Locations(s.Path) {
			found = found || inBucket(loc)
		}
		if !found || (exact && !inBucket(s.Path)) {
			t.Errorf("%s: the catalog lists %s, which is not in the bucket (in place: %v)", stage, s.Path, inBucket(s.Path))
		}
	}
	if rows != want {
		t.Errorf("%s: live segments hold %d rows, want %d", stage, rows, want)
	}
	var globbed int64
	filepath.WalkDir(filepath.Join(root, "logs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			n, known := rowsOf[rel]
			if !known {
				t.Errorf("%s: the bucket's Hive tree holds %s, which the catalog does not know", stage, rel)
			}
			if exact && !live[rel] {
				t.Errorf("%s: the bucket's Hive tree holds %s, which the catalog does not list as live", stage, rel)
			}
			globbed += n
		}
		return nil
	})
	if globbed < want || (exact && globbed != want) {
		t.Errorf("%s: a glob over the bucket's Hive tree counts %d rows, want %d", stage, globbed, want)
	}
}

// TestLakeAuditS3Faults runs ingest, compaction and retention against a
// real S3 server that answers 500 and 503 to some or all requests of one
// kind. Whatever fails, nothing acknowledged is lost, the catalog lists no
// file that is not in the bucket, and once S3 answers again the bucket's
// Hive tree holds each row once.
func TestLakeAuditS3Faults(t *testing.T) {
	srv := s3test.Start(t)
	l := &s3Lake{srv: srv, proxy: s3test.NewFaultProxy(t, srv.Endpoint), bucket: srv.Bucket(t), state: t.TempDir()}
	hour := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
	old := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	// Ingest, one segment per file and partition, while every third
	// upload answers 503: the S3 client's bounded retries carry it.
	l.proxy.Set(func(op string, n int) int {
		if op == "put" && n%3 == 1 {
			return 503
		}
		return 0
	})
	var want int64
	for i := range 4 {
		f := writeLogsFile(t, hour.Add(time.Duration(i)*time.Minute), 2, 50)
		if out, err := l.sluice(t, "ingest", "--progress", "never", f); err != nil {
			t.Fatalf("ingest %d with 503s: %v\n%s", i, err, out)
		}
		want += 100
	}
	if out, err := l.sluice(t, "ingest", "--progress", "never", writeLogsFile(t, old, 1, 10)); err != nil {
		t.Fatalf("ingest old: %v\n%s", err, out)
	}
	want += 10
	if l.proxy.Faults() == 0 {
		t.Fatal("the proxy answered no request with 503")
	}
	l.check(t, "after ingest with 503s", want, true)

	// S3 refuses every upload: compaction fails, saying so, and changes
	// nothing a reader sees.
	for _, tc := range []struct {
		name  string
		fault func(op string, n int) int
	}{
		{"every upload 500", func(op string, n int) int {
			if op == "put" || op == "part" || op == "complete" {
				return 500
			}
			return 0
		}},
		{"every copy 503", func(op string, n int) int {
			if op == "copy" {
				return 503
			}
			return 0
		}},
		{"every delete 500", func(op string, n int) int {
			if op == "delete" {
				return 500
			}
			return 0
		}},
		{"half of all requests 503", func(op string, n int) int {
			if n%2 == 0 {
				return 503
			}
			return 0
		}},
	} {
		l.proxy.Set(tc.fault)
		start := time.Now()
		out, err := l.sluice(t, "compact", "--grace", "0")
		t.Logf("compact, %s: err=%v in %s\n%s", tc.name, err, time.Since(start).Round(time.Millisecond), out)
		if time.Since(start) > 2*time.Minute {
			t.Errorf("compact, %s: took %s; retries must be bounded", tc.name, time.Since(start))
		}
		l.check(t, "compact, "+tc.name, want, false)
	}

	// S3 answers again: compaction (and its recovery of what the failed
	// runs left) completes, and the bucket holds each row once.
	l.proxy.Set(nil)
	if out, err := l.sluice(t, "compact", "--grace", "0"); err != nil {
		t.Fatalf("compact after the faults: %v\n%s", err, out)
	}
	l.check(t, "compact after the faults", want, true)

	// Retention while every copy fails (its moves to _trash/), then again
	// once S3 answers.
	l.proxy.Set(func(op string, n int) int {
		if op == "copy" || op == "delete" {
			return 503
		}
		return 0
	})
	out, err := l.sluice(t, "retention", "--keep", "logs=7d")
	t.Logf("retention, every copy and delete 503: err=%v\n%s", err, out)
	l.check(t, "retention with failing moves", want-10, false)
	l.proxy.Set(nil)
	if out, err := l.sluice(t, "retention", "--keep", "logs=7d"); err != nil {
		t.Fatalf("retention after the faults: %v\n%s", err, out)
	}
	if out, err := l.sluice(t, "compact", "--grace", "0"); err != nil {
		t.Fatalf("compact (sweep) after retention: %v\n%s", err, out)
	}
	l.check(t, "retention after the faults", want-10, true)
}
