package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
)

// wideBody is an OTLP logs request of n records with perRecord distinct
// attribute keys each ("<prefix>.k<seq>.<k>": string, int or double by k%3)
// and a "seq" attribute numbered from first.
func wideBody(t testing.TB, first int64, n, perRecord int, prefix string) []byte {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "wide")
	sl := rl.ScopeLogs().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Now())
	for i := range int64(n) {
		seq := first + i
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(now)
		r.Body().SetStr(fmt.Sprintf("wide record %d", seq))
		a := r.Attributes()
		a.PutInt("seq", seq)
		for k := range perRecord {
			key := fmt.Sprintf("%s.k%d.%d", prefix, seq, k)
			switch k % 3 {
			case 0:
				a.PutStr(key, fmt.Sprintf("v%d.%d", seq, k))
			case 1:
				a.PutInt(key, seq*1000+int64(k))
			default:
				a.PutDouble(key, float64(k)+0.5)
			}
		}
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sendLogs sends one OTLP/HTTP logs request and returns the status and body.
func sendLogs(t testing.TB, addr, tenant string, body []byte) (int, string) {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/logs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tenantRecords reads every catalogued logs file of tenant with sluice's
// own reader and returns the attributes of each record by seq, rendered
// "key=type:value".
func tenantRecords(t *testing.T, lakeDir, tenant string) map[int64]map[string]string {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(lakeDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(ctx, catalog.Filter{Table: "logs", Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]map[string]string{}
	for _, s := range segs {
		f, err := lake.OpenFile(filepath.Join(lakeDir, s.Path))
		if err != nil {
			t.Fatalf("catalogued file: %v", err)
		}
		var l signal.Logs
		if err := f.ReadLogs(&l); err != nil {
			t.Fatal(err)
		}
		f.Close()
		c := &l.Common
		for i := range l.Len() {
			a := l.FindAttr(l.Attr[i], "seq")
			if a < 0 {
				t.Fatalf("%s: record without seq", s.Path)
			}
			attrs := map[string]string{}
			for j := l.Attr[i].Start; j < l.Attr[i].End; j++ {
				v := fmt.Sprint(c.Attrs.Val[j])
				if c.Attrs.Type[j] == signal.ValueString {
					v = c.String(signal.Str(c.Attrs.Val[j]))
				}
				attrs[c.Keys.Name(c.Attrs.Key[j])] = fmt.Sprintf("%s:%s", c.Attrs.Type[j], v)
			}
			out[l.AttrInt(a)] = attrs
		}
	}
	return out
}

// TestFaultManyAttributeKeys is issue 11 item 1: one request of 65,000
// distinct attribute keys, then 70 requests of 1,000 keys each into one
// tenant and hour, used to be acknowledged and then stop every lake
// checkpoint for every tenant, for good ("column index out of range:
// 65535"), with /readyz still 200. Now every record lands, the keys past
// the column cap read back from the overflow column (sluice's reader,
// DuckDB and pyarrow), another tenant's data keeps landing and /readyz
// stays 200.
func TestFaultManyAttributeKeys(t *testing.T) {
	lakeDir := t.TempDir()
	// Files as large as by default, so that the wide requests share one.
	cfg := runConfig(t, lakeDir)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, bytes.Replace(b, []byte("target_file_bytes: 64KiB"), []byte("target_file_bytes: 128MiB"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)

	const bigN, bigKeys = 650, 100 // 65,000 distinct keys in one request
	if code, body := sendLogs(t, s.http, "wide", wideBody(t, 0, bigN, bigKeys, "big")); code != 200 {
		t.Fatalf("65k-key request: %d %s", code, body)
	}
	total := bigN
	for i := range 70 { // 70 requests of 1,000 keys
		if code, body := sendLogs(t, s.http, "wide", wideBody(t, int64(total), 10, 100, fmt.Sprintf("r%d", i))); code != 200 {
			t.Fatalf("request %d of 1,000 keys: %d %s", i, code, body)
		}
		total += 10
	}
	g := newLoadGen(50)
	client := &http.Client{Timeout: 5 * time.Second}
	if !g.send(t, context.Background(), client, s.http) {
		t.Fatal("an ordinary request after the wide ones was refused")
	}

	deadline := time.Now().Add(60 * time.Second)
	var recs map[int64]map[string]string
	for {
		if code, body := readyz(t, s.admin); code != 200 {
			t.Fatalf("/readyz %d: %s\n%s", code, body, s.stderr)
		}
		recs = tenantRecords(t, lakeDir, "wide")
		other := tenantRecords(t, lakeDir, "load")
		if len(recs) == total && len(other) == g.ackedCount() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the lake has %d of %d wide records and %d of %d others\n%s", len(recs), total, len(other), g.ackedCount(), s.stderr)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if strings.Contains(s.stderr.String(), "panic") {
		t.Errorf("the log mentions a panic:\n%s", s.stderr)
	}
	// Lossless through sluice's reader: every key with its type and value.
	for seq, attrs := range recs {
		n := bigKeys
		prefix := "big"
		if seq >= bigN {
			n, prefix = 100, fmt.Sprintf("r%d", (seq-bigN)/10)
		}
		if len(attrs) != n+1 {
			t.Fatalf("seq %d: %d attributes, want %d", seq, len(attrs), n+1)
		}
		for _, k := range []int{0, 1, 2, n - 1} {
			key := fmt.Sprintf("%s.k%d.%d", prefix, seq, k)
			want := map[int]string{0: fmt.Sprintf("string:v%d.%d", seq, k), 1: fmt.Sprintf("int:%d", seq*1000+int64(k))}[k%3]
			if k%3 == 2 {
				want = "double:" // value bits checked below by DuckDB
			}
			if got := attrs[key]; !strings.HasPrefix(got, want) || (k%3 != 2 && got != want) {
				t.Fatalf("seq %d %s = %q, want %q", seq, key, got, want)
			}
		}
	}

	// DuckDB and pyarrow: every row, and a key past the cap read from the
	// overflow column with its type.
	script := `import duckdb, json, sys, glob
import pyarrow.parquet as pq
lake = sys.argv[1]

def expect(key):
    prefix, seq, k = key.rsplit(".", 2)
    seq, k = int(seq[1:]), int(k)
    return [{"stringValue": "v%d.%d" % (seq, k)}, {"intValue": str(seq * 1000 + k)}, {"doubleValue": k + 0.5}][k % 3]

con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
src = "read_parquet('%s/logs/tenant=wide/**/*.parquet', hive_partitioning=true, union_by_name=true)" % lake
n, over = con.execute("SELECT count(*), count(attr_overflow) FROM " + src).fetchone()
# Every overflow entry, by DuckDB's JSON functions.
pairs = con.execute("""SELECT k, json_extract(attr_overflow, '$."' || k || '"')::VARCHAR
  FROM (SELECT attr_overflow, unnest(json_keys(attr_overflow)) AS k FROM """ + src + " WHERE attr_overflow IS NOT NULL)").fetchall()
bad = [p for p in pairs if json.loads(p[1]) != expect(p[0])]
v, = con.execute("""SELECT max(json_extract_string(attr_overflow, '$."big.k649.99".stringValue')) FROM """ + src).fetchone()
print("duckdb", n, over, len(pairs), len(bad), v)
# The same with pyarrow.
keys = bad = 0
for f in glob.glob(lake + "/logs/tenant=wide/**/*.parquet", recursive=True):
    t = pq.read_table(f)
    if "attr_overflow" not in t.column_names:
        continue
    for s in t.column("attr_overflow").to_pylist():
        for key, val in json.loads(s or "{}").items():
            keys += 1
            bad += val != expect(key)
print("pyarrow", keys, bad)
`
	out, err := exec.Command(python(t), "-c", script, lakeDir).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb/pyarrow: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var n, over, pairs, bad, keys, pbad int
	var v string
	if len(lines) != 2 {
		t.Fatalf("duckdb/pyarrow: %s", out)
	}
	if _, err := fmt.Sscanf(lines[0], "duckdb %d %d %d %d %s", &n, &over, &pairs, &bad, &v); err != nil {
		t.Fatalf("duckdb: %q: %v", lines[0], err)
	}
	if _, err := fmt.Sscanf(lines[1], "pyarrow %d %d", &keys, &pbad); err != nil {
		t.Fatalf("pyarrow: %q: %v", lines[1], err)
	}
	// One file holds the 65k-key request: all but ~1,000 keys overflow.
	if n != total || over == 0 || pairs < 60000 || bad != 0 || v != "v649.99" || keys != pairs || pbad != 0 {
		t.Fatalf("DuckDB: %d rows (want %d), %d with overflow, %d overflow keys, %d wrong, big.k649.99 = %q; pyarrow: %d keys, %d wrong",
			n, total, over, pairs, bad, v, keys, pbad)
	}
	t.Logf("%s; %s", lines[0], lines[1])
}

// TestFaultPoisonQuarantine: a record the lake writer cannot encode (made
// so by the SLUICE_FAULT_POISON_KEY fault injection) used to fail every
// checkpoint for good; now it goes to the quarantine, the records sent
// before and after it land once, /readyz is 200 again, and `sluice lake
// quarantine ls` lists it.
func TestFaultPoisonQuarantine(t *testing.T) {
	t.Setenv("SLUICE_FAULT_POISON_KEY", "poison.key")
	lakeDir := t.TempDir()
	s := startServer(t, runConfig(t, lakeDir))
	g := newLoadGen(20)
	client := &http.Client{Timeout: 5 * time.Second}
	for range 3 {
		if !g.send(t, context.Background(), client, s.http) {
			t.Fatal("request refused")
		}
	}
	ld := plog.NewLogs()
	r := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	r.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	r.Attributes().PutStr("poison.key", "x")
	poison, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if code, body := sendLogs(t, s.http, "bad", poison); code != 200 {
		t.Fatalf("poison request: %d %s", code, body)
	}
	for range 3 {
		if !g.send(t, context.Background(), client, s.http) {
			t.Fatal("request refused")
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := tenantRecords(t, lakeDir, "load")
		code, _ := readyz(t, s.admin)
		if len(got) == g.ackedCount() && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d of %d records in the lake, /readyz %d\n%s", len(got), g.ackedCount(), code, s.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	counts, ok := duckdbCounts(t, lakeDir)
	if ok {
		for seq, n := range counts {
			if n != 1 {
				t.Errorf("seq %d: %d times in the lake files", seq, n)
			}
		}
		if len(counts) != g.ackedCount() {
			t.Errorf("DuckDB: %d records, want %d", len(counts), g.ackedCount())
		}
	}
	res := run(t, "lake", "quarantine", "ls", "--lake", lakeDir)
	if res.code != 0 || !strings.Contains(res.stdout, "logs") || !strings.Contains(res.stdout, " bad ") ||
		!strings.Contains(res.stdout, "poison") || !strings.Contains(res.stdout, "1 quarantined") {
		t.Fatalf("quarantine ls: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), "sluice_lake_quarantined_records_total 1\n") {
		t.Errorf("/metrics lacks sluice_lake_quarantined_records_total 1")
	}
	t.Logf("quarantine ls:\n%s", res.stdout)
}
