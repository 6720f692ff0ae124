package search

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// copySpec writes the corpus once more for tenant, with every time moved
// by shift.
type copySpec struct {
	tenant string
	shift  time.Duration
}

type testLake struct {
	dir   string
	cat   *catalog.Catalog
	store lake.Store
}

// buildLake writes the real corpus (logs and traces) into a fresh lake,
// once per copy, each input file flushed into its own files.
func buildLake(tb testing.TB, rowGroupRows int, copies []copySpec, extra func(w *lake.Writer)) *testLake {
	tb.Helper()
	return buildLakeCapped(tb, rowGroupRows, 0, copies, extra)
}

// buildLakeCapped is buildLake with lake.max_attribute_columns maxAttrCols
// (0: the default).
func buildLakeCapped(tb testing.TB, rowGroupRows, maxAttrCols int, copies []copySpec, extra func(w *lake.Writer)) *testLake {
	tb.Helper()
	dir := tb.TempDir()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cat.Close() })
	store := lake.NewLocalStore(dir)
	w, err := lake.NewWriter(lake.Options{Store: store, RowGroupRows: rowGroupRows, MaxAttributeColumns: maxAttrCols,
		Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }},
		func(s lake.Segment) error { return cat.AddSegments(ctx, s.CatalogRow()) })
	if err != nil {
		tb.Fatal(err)
	}
	var logs signal.Logs
	var spans signal.Spans
	for _, c := range copies {
		for _, f := range corpustest.Files(tb, "logs") {
			logs.Reset()
			if err := otlp.DecodeLogs(&logs, corpustest.Read(tb, f)); err != nil {
				tb.Fatal(err)
			}
			shiftTimes(logs.Time, c.shift)
			shiftTimes(logs.ObservedTime, c.shift)
			if err := w.WriteLogs(c.tenant, &logs); err != nil {
				tb.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				tb.Fatal(err)
			}
		}
		for _, f := range corpustest.Files(tb, "traces") {
			spans.Reset()
			if err := otlp.DecodeTraces(&spans, corpustest.Read(tb, f)); err != nil {
				tb.Fatal(err)
			}
			shiftTimes(spans.StartTime, c.shift)
			shiftTimes(spans.EndTime, c.shift)
			if err := w.WriteSpans(c.tenant, &spans); err != nil {
				tb.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if extra != nil {
		extra(w)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return &testLake{dir: dir, cat: cat, store: store}
}

func shiftTimes(ts []int64, d time.Duration) {
	for i, t := range ts {
		if t != 0 {
			ts[i] = t + int64(d)
		}
	}
}

// expLog is a corpus log record as pdata decodes it: the expectation side
// of the tests, computed without sluice's decoder or reader.
type expLog struct {
	t, observed int64
	service     string
	sevNum      int64
	sevText     string
	body        string
	attrs       pcommon.Map
	res         pcommon.Map
}

func (e *expLog) key() string { return fmt.Sprintf("%d|%s|%s", e.t, e.service, e.body) }

// corpusLogs decodes the corpus with pdata, shifted like copySpec.
func corpusLogs(tb testing.TB, shift time.Duration) []expLog {
	tb.Helper()
	var out []expLog
	for _, f := range corpustest.Files(tb, "logs") {
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(corpustest.Read(tb, f))
		if err != nil {
			tb.Fatal(err)
		}
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			res := rls.At(i).Resource().Attributes()
			svc := ""
			if v, ok := res.Get("service.name"); ok {
				svc = v.AsString()
			}
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					lr := lrs.At(k)
					e := expLog{t: int64(lr.Timestamp()), observed: int64(lr.ObservedTimestamp()), service: svc,
						sevNum: int64(lr.SeverityNumber()), sevText: lr.SeverityText(), body: lr.Body().AsString(),
						attrs: lr.Attributes(), res: res}
					if e.t != 0 {
						e.t += int64(shift)
					}
					if e.observed != 0 {
						e.observed += int64(shift)
					}
					if e.t == 0 {
						e.t = e.observed
					}
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// corpusTraces returns the corpus spans by trace id (hex).
func corpusTraces(tb testing.TB) map[string][]ptrace.Span {
	tb.Helper()
	out := map[string][]ptrace.Span{}
	for _, f := range corpustest.Files(tb, "traces") {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(corpustest.Read(tb, f))
		if err != nil {
			tb.Fatal(err)
		}
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				sp := sss.At(j).Spans()
				for k := 0; k < sp.Len(); k++ {
					id := sp.At(k).TraceID().String()
					out[id] = append(out[id], sp.At(k))
				}
			}
		}
	}
	return out
}

// client calls the handler over real HTTP.
type client struct {
	tb     testing.TB
	url    string
	tenant string
	slim   bool // decode only the fields compared (see decode)
}

func serve(tb testing.TB, tl *testLake, o Options) *client {
	if o.TenantHeader == "" {
		o.TenantHeader = "X-Scope-OrgID"
	}
	srv := httptest.NewServer(NewHandler(tl.cat, tl.store, o))
	tb.Cleanup(srv.Close)
	return &client{tb: tb, url: srv.URL}
}

func (c *client) get(path string, q url.Values) (int, []byte) {
	c.tb.Helper()
	u := c.url + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if c.tenant != "" {
		req.Header.Set("X-Scope-OrgID", c.tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.tb.Fatal(err)
	}
	return resp.StatusCode, b
}

// lines calls a search and returns its records and final line.
func (c *client) lines(path string, q url.Values) ([]map[string]any, map[string]any) {
	c.tb.Helper()
	code, b := c.get(path, q)
	if code != http.StatusOK {
		c.tb.Fatalf("GET %s?%s: %d %s", path, q.Encode(), code, b)
	}
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		m, err := c.decode(sc.Bytes())
		if err != nil {
			c.tb.Fatalf("line %q: %v", sc.Text(), err)
		}
		recs = append(recs, m)
	}
	if len(recs) == 0 {
		c.tb.Fatalf("GET %s: empty body", path)
	}
	return recs[:len(recs)-1], recs[len(recs)-1]
}

// decode parses one line; with c.slim only the fields the tests compare
// (decoding whole records into maps dominated the test time).
func (c *client) decode(b []byte) (map[string]any, error) {
	if !c.slim {
		var m map[string]any
		err := json.Unmarshal(b, &m)
		return m, err
	}
	var l struct {
		Timestamp         *string         `json:"timestamp"`
		ObservedTimestamp *string         `json:"observed_timestamp"`
		Service           *string         `json:"service"`
		Cursor            *string         `json:"cursor"`
		Body              json.RawMessage `json:"body"`
		Done              *bool           `json:"done"`
		TraceID           *string         `json:"trace_id"`
		SpanID            *string         `json:"span_id"`
		Name              *string         `json:"name"`
		Start             *string         `json:"start"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	m := map[string]any{}
	for k, v := range map[string]*string{"timestamp": l.Timestamp, "observed_timestamp": l.ObservedTimestamp,
		"service": l.Service, "cursor": l.Cursor, "trace_id": l.TraceID, "span_id": l.SpanID, "name": l.Name, "start": l.Start} {
		if v != nil {
			m[k] = *v
		}
	}
	if l.Done != nil {
		m["done"] = *l.Done
	}
	if len(l.Body) > 0 && l.Body[0] == '"' {
		var s string
		if err := json.Unmarshal(l.Body, &s); err != nil {
			return nil, err
		}
		m["body"] = s
	} else if len(l.Body) > 0 {
		m["body"] = map[string]any{}
	}
	return m, nil
}

// all pages through a search with the given limit and returns every record.
func (c *client) all(path string, q url.Values, limit int) []map[string]any {
	c.tb.Helper()
	c.slim = true
	defer func() { c.slim = false }()
	var out []map[string]any
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = v
	}
	q2.Set("limit", fmt.Sprint(limit))
	for pages := 0; ; pages++ {
		if pages > 100000 {
			c.tb.Fatal("paging does not end")
		}
		recs, last := c.lines(path, q2)
		out = append(out, recs...)
		cur, ok := last["cursor"].(string)
		if !ok {
			if last["done"] != true {
				c.tb.Fatalf("final line %v has neither cursor nor done", last)
			}
			return out
		}
		if len(recs) != limit {
			c.tb.Fatalf("page with a cursor has %d records, want %d", len(recs), limit)
		}
		q2.Set("cursor", cur)
	}
}

func corpusFiles(tb testing.TB, kind string) [][]byte {
	var out [][]byte
	for _, f := range corpustest.Files(tb, kind) {
		out = append(out, corpustest.Read(tb, f))
	}
	return out
}
