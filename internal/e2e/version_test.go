package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// TestVersionOneString: `sluice --version`, `sluice version`, the
// created_by of every Parquet file sluice writes (ingest and compaction)
// and the query API's buildinfo (beside the Prometheus version Grafana
// reads) carry one version string, not "dev", "(devel)" or "3.0.0".
func TestVersionOneString(t *testing.T) {
	r := run(t, "--version")
	v, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "sluice ")
	if r.code != 0 || !ok || v == "" || v == "dev" || v == "(devel)" || v == "3.0.0" || strings.ContainsAny(v, " \n") {
		t.Fatalf("sluice --version: exit %d, %q", r.code, r.stdout)
	}
	if r := run(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "sluice "+v+"\n") || !strings.Contains(r.stdout, "prometheus api 3.0.0") {
		t.Fatalf("sluice version: exit %d, %q; want sluice %s", r.code, r.stdout, v)
	}

	lake := filepath.Join(t.TempDir(), "lake")
	logs := filepath.Join(corpustest.Dir(t), "otlp", "logs")
	for range 2 { // two files per partition, for compaction
		if r := run(t, "ingest", "--lake", lake, "--progress", "never", logs); r.code != 0 {
			t.Fatalf("ingest: exit %d\n%s", r.code, r.stderr)
		}
	}
	createdBy := func(when string) {
		t.Helper()
		files := parquetFiles(t, lake)
		if len(files) == 0 {
			t.Fatalf("%s: no files", when)
		}
		for _, f := range files {
			r := run(t, "parquet", "schema", filepath.Join(lake, f))
			if r.code != 0 || !strings.Contains(r.stdout, "\ncreated by: sluice version "+v+"(build") {
				t.Fatalf("%s: %s: created by is not sluice %s:\n%s%s", when, f, v, r.stdout, r.stderr)
			}
		}
	}
	createdBy("after ingest")
	if r := run(t, "compact", "--lake", lake, "--grace", "0"); r.code != 0 || strings.Contains(r.stdout, "plan: 0 partitions") {
		t.Fatalf("compact: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	createdBy("after compaction")

	base := "http://" + startQueryServer(t, "--lake", lake)
	resp, err := http.Get(base + "/api/v1/status/buildinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var bi struct {
		Data map[string]string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&bi); err != nil {
		t.Fatal(err)
	}
	if bi.Data["version"] != "3.0.0" || bi.Data["sluice_version"] != v {
		t.Fatalf("buildinfo %v: want version 3.0.0 (Prometheus, for Grafana) and sluice_version %s", bi.Data, v)
	}
}
