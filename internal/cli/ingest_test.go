package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The soft memory limit follows the largest input: a compressed file
// counts 8x its size, and no file counts past max-file-bytes.
func TestLargestInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain, gz, zst := write("a.binpb", 1000), write("b.json.GZ", 200), write("c.binpb.zst", 100)
	for _, c := range []struct {
		files []string
		max   int64
		want  int64
	}{
		{[]string{plain}, 1 << 20, 1000},
		{[]string{plain, gz}, 1 << 20, 1600},
		{[]string{zst, plain}, 1 << 20, 1000},
		{[]string{plain, gz}, 1200, 1200},
		{[]string{filepath.Join(dir, "missing.json")}, 1 << 20, 0},
	} {
		if got := largestInput(c.files, c.max); got != c.want {
			t.Errorf("largestInput(%v, %d) = %d, want %d", c.files, c.max, got, c.want)
		}
	}
}

// TestIngestRefusesBadTenant: `sluice ingest --tenant` with a name the lake
// cannot hold is a usage error naming the flag before anything is read or
// created (it said "ingested 1 of 1 files" first, then failed).
func TestIngestRefusesBadTenant(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "logs.json")
	if err := os.WriteFile(in, []byte(`{"resourceLogs":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "lake")
	for _, bad := range []string{"../x", "a/b", ""} {
		var out, errOut bytes.Buffer
		code := Main([]string{"ingest", "--lake", root, "--tenant", bad, in}, nil, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "--tenant") || strings.Contains(out.String(), "ingested") {
			t.Errorf("--tenant %q: exit %d, stdout %q, stderr %q; want exit 2 naming --tenant", bad, code, out.String(), errOut.String())
		}
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("a refused ingest created the lake (%v)", err)
	}
}

// TestS3MaxRetriesFlag: --s3-max-retries below 1 is a usage error naming
// the flag.
func TestS3MaxRetriesFlag(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "logs.json")
	if err := os.WriteFile(in, []byte(`{"resourceLogs":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Main([]string{"ingest", "--lake", filepath.Join(dir, "lake"), "--s3-bucket", "b", "--s3-max-retries", "0", in}, nil, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "--s3-max-retries 0: want 1 or more") {
		t.Errorf("exit %d, stderr %q; want 2 naming --s3-max-retries", code, errOut.String())
	}
}
