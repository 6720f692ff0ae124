package corpustest

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Dir returns the corpus directory ($SLUICE_CORPUS, or ../shared/corpus
// from the module root). When it is absent the test is skipped with a clear
// message, or fails when SLUICE_REQUIRE_ALL is set (as the test command
// sets it), so that CI never skips silently.
func Dir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("SLUICE_CORPUS"); d != "" {
		return d
	}
	root, err := ModuleRoot()
	if err == nil {
		d := filepath.Join(root, "..", "shared", "corpus")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	Missing(tb, "the OTLP corpus (../shared/corpus beside the repository, or $SLUICE_CORPUS)")
	return ""
}

// Files returns the corpus files of one signal folder: "logs", "metrics" or
// "traces".
func Files(tb testing.TB, kind string) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(Dir(tb), "otlp", kind, "*"))
	if err != nil || len(files) == 0 {
		Missing(tb, "corpus files in otlp/"+kind)
	}
	return files
}

// Missing skips the test for a missing prerequisite, or fails it when
// SLUICE_REQUIRE_ALL is set.
func Missing(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv("SLUICE_REQUIRE_ALL") != "" {
		tb.Fatalf("missing %s (SLUICE_REQUIRE_ALL is set, so this is a failure, not a skip)", what)
	}
	tb.Skipf("skipped: missing %s; run `make test` to set everything up", what)
}

// ModuleRoot is the directory holding go.mod, found from the working
// directory upwards.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Read returns the content of a corpus file, gunzipped when its name ends
// in .gz.
func Read(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if !strings.HasSuffix(path, ".gz") {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	if b, err = io.ReadAll(zr); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return b
}
