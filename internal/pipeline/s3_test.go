package pipeline

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
	"github.com/sluice-dev/sluice/internal/signal"
)

func s3Config(t *testing.T, srv *s3test.Server) (config.Config, *s3store.Store) {
	t.Helper()
	cfg := testConfig(t)
	sc := srv.Config(srv.Bucket(t))
	cfg.Lake.S3 = config.S3{
		Bucket: sc.Bucket, Prefix: "lake", Endpoint: sc.Endpoint, Region: sc.Region,
		AccessKeyID: sc.AccessKeyID, SecretAccessKey: sc.SecretAccessKey, ForcePathStyle: true,
		PartSize: config.ByteSize(s3store.MinPartSize), MaxRetries: 2,
	}
	sc.Prefix = "lake"
	st, err := s3store.New(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, st
}

// s3Seqs reads the "seq" attributes of every logs segment in the catalog
// from the store, by tenant.
func s3Seqs(t *testing.T, root string, st lake.Store) map[string][]int64 {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(context.Background(), catalog.Filter{Table: "logs"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int64{}
	for _, s := range segs {
		f, err := lake.OpenObject(st, s.Path)
		if err != nil {
			t.Fatal(err)
		}
		var l signal.Logs
		if err := f.ReadLogs(&l); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for i := range l.Len() {
			out[s.Tenant] = append(out[s.Tenant], l.AttrInt(l.FindAttr(l.Attr[i], "seq")))
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func TestPipelineS3(t *testing.T) {
	srv := s3test.Start(t)
	cfg, st := s3Config(t, srv)
	p := start(t, cfg)
	for i, tenant := range []string{"acme", "globex", "acme"} {
		if r := post(t, p, "/v1/logs", tenant, logsRequest(t, i*10, 10)); r.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, r.StatusCode)
		}
	}
	if err := p.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := s3Seqs(t, cfg.Lake.Root, st)
	if !slices.Equal(got["acme"], append(seqRange(0, 10), seqRange(20, 10)...)) || !slices.Equal(got["globex"], seqRange(10, 10)) {
		t.Fatalf("seqs %v", got)
	}
	// The local root holds no lake files.
	_ = filepath.WalkDir(cfg.Lake.Root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			t.Errorf("lake file under the local root: %s", p)
		}
		return nil
	})

	// A file of a checkpoint that never committed is swept at restart.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	const orphan = "logs/tenant=acme/dt=2025-01-02/hour=03/orphan.parquet"
	w, err := st.Create(orphan)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("PAR1")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	p2 := start(t, cfg)
	if _, err := st.Open(orphan); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("orphan not swept: %v", err)
	}
	if r := post(t, p2, "/v1/logs", "globex", logsRequest(t, 30, 5)); r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	if err := p2.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s3Seqs(t, cfg.Lake.Root, st)["globex"]; !slices.Equal(got, append(seqRange(10, 10), seqRange(30, 5)...)) {
		t.Fatalf("after restart: %v", got)
	}
}

func TestSweepOrphansS3(t *testing.T) {
	srv := s3test.Start(t)
	_, st := s3Config(t, srv)
	ctx := context.Background()
	write := func(p string) {
		w, err := st.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(p string) bool {
		r, err := st.Open(p)
		if err == nil {
			r.Close()
		}
		return err == nil
	}
	const (
		known  = "logs/tenant=a/dt=2025-01-02/hour=03/known.parquet"
		orphan = "logs/tenant=a/dt=2025-01-02/hour=03/orphan.parquet"
	)
	keep := []string{
		known,
		"logs/tenant=a/dt=2025-01-02/hour=03/notes.txt",
		"logs/tenant=a/dt=2025-01-02/stray.parquet",
		"logs/tenant=a/dt=2025-01-02/hour=03/x/deep.parquet",
		"logs/a/dt=2025-01-02/hour=03/bad-layout.parquet",
		"_other/t/tenant=a/dt=2025-01-02/hour=03/hidden.parquet",
		"logs/tenant=a/dt=2025-01-02/hour=03/.hidden.parquet",
		"top.parquet",
	}
	for _, f := range append(keep, orphan, "metrics/tenant=b/dt=2025-01-02/hour=04/o2.parquet") {
		write(f)
	}
	root := t.TempDir()
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()

	res, err := sweepOrphans(ctx, cat, st, 0, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Quarantined != 3 || res.Removed != 0 {
		t.Fatalf("first sweep %+v", res)
	}
	if !exists("_orphans/"+known) || exists(known) {
		t.Fatal("quarantine did not move the files")
	}
	for _, f := range keep[1:] {
		if !exists(f) {
			t.Errorf("sweep touched %s", f)
		}
	}

	write(known)
	write(orphan)
	start := time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC).UnixNano()
	seg := catalog.Segment{Table: "logs", Tenant: "a", Day: "2025-01-02", Hour: 3, Path: known, MinTime: start, MaxTime: start, Rows: 1, Bytes: 1}
	if err := cat.AddSegmentsWithQueue(ctx, catalog.QueueCommit{Name: QueueName, Pos: 10}, seg); err != nil {
		t.Fatal(err)
	}
	res, err = sweepOrphans(ctx, cat, st, 10, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 1 || res.Quarantined != 0 || exists(orphan) || !exists(known) {
		t.Fatalf("second sweep %+v", res)
	}
	for _, f := range keep {
		if !exists(f) {
			t.Errorf("sweep touched %s", f)
		}
	}
}
