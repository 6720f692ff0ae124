package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/sluice-dev/sluice/internal/lake"
)

// poisonRequest is a logs request the lake cannot encode under the
// SLUICE_FAULT_POISON_KEY fault injection: one record carries "poison".
func poisonRequest(t *testing.T, seq int) []byte {
	req := plogotlp.NewExportRequest()
	if err := req.UnmarshalProto(logsRequest(t, seq, 1)); err != nil {
		t.Fatal(err)
	}
	req.Logs().ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutStr("poison", "yes")
	b, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPipelineQuarantine: a record the lake writer cannot write fails one
// checkpoint (/readyz 503 saying why), then goes to the quarantine while
// the records before and after it land, /readyz is 200 again, and a
// restart replays nothing: each record is in the lake or the quarantine,
// once.
func TestPipelineQuarantine(t *testing.T) {
	t.Setenv("SLUICE_FAULT_POISON_KEY", "poison")
	// The loop replays (and then recovers) one backoff after the failed
	// checkpoint: hold the failing state long enough for /readyz to be
	// asked on a loaded machine (5 s was once too short at load 10).
	rewindMinBackoff = 15 * time.Second
	t.Cleanup(func() { rewindMinBackoff = minBackoff })
	cfg := testConfig(t)
	p := start(t, cfg)
	poison := poisonRequest(t, 100)
	for _, body := range [][]byte{logsRequest(t, 0, 3), poison, logsRequest(t, 10, 3)} {
		if r := post(t, p, "/v1/logs", "acme", body); r.StatusCode != 200 {
			t.Fatalf("status %d", r.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := p.Checkpoint(ctx)
	if err == nil || !strings.Contains(err.Error(), "poison") {
		t.Fatalf("first checkpoint: %v, want the poison failure", err)
	}
	if code, body := get(t, p, "/readyz"); code != 503 || !strings.Contains(body, "lake checkpoints failing (1 in a row") || !strings.Contains(body, "poison") {
		t.Errorf("/readyz while failing: %d %q", code, body)
	}
	if err := p.Checkpoint(ctx); err != nil {
		t.Fatalf("checkpoint after the replay: %v", err)
	}
	if code, body := get(t, p, "/readyz"); code != 200 {
		t.Errorf("/readyz after recovery: %d %q", code, body)
	}
	want := append(seqRange(0, 3), seqRange(10, 3)...)
	if got := lakeSeqs(t, cfg.Lake.Root)["acme"]; !slices.Equal(got, want) {
		t.Fatalf("lake: %v, want %v", got, want)
	}
	checkQuarantine := func() {
		t.Helper()
		q, err := lake.ListQuarantine(lake.NewLocalStore(cfg.Lake.Root))
		if err != nil || len(q) != 1 {
			t.Fatalf("quarantine: %+v %v", q, err)
		}
		e := q[0]
		if e.Table != "logs" || e.Tenant != "acme" || e.Records != 1 || !strings.Contains(e.Reason, "poison") {
			t.Errorf("entry %+v", e)
		}
		body, err := os.ReadFile(filepath.Join(cfg.Lake.Root, filepath.FromSlash(e.Body)))
		if err != nil || string(body) != string(poison) {
			t.Errorf("quarantined body differs from the request (%d bytes, %v)", len(body), err)
		}
	}
	checkQuarantine()
	_, m := get(t, p, "/metrics")
	for _, s := range []string{"sluice_lake_quarantined_records_total 1", "sluice_lake_checkpoint_failures_total 1"} {
		if !strings.Contains(m, s+"\n") {
			t.Errorf("metrics lack %q:\n%s", s, grep(m, "sluice_lake_"))
		}
	}

	// Restart: nothing is replayed, into the lake or the quarantine.
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	p2 := start(t, cfg)
	if r := post(t, p2, "/v1/logs", "acme", logsRequest(t, 20, 2)); r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	if err := p2.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, seqRange(20, 2)...)
	if got := lakeSeqs(t, cfg.Lake.Root)["acme"]; !slices.Equal(got, want) {
		t.Fatalf("lake after restart: %v, want %v", got, want)
	}
	checkQuarantine()
}
