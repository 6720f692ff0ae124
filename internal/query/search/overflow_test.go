package search

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
)

// TestFilterOverflowAttributes: attribute filters match keys that a file
// stores in its overflow column (past lake.max_attribute_columns) as they
// match columns: typed equality and regexps, resource keys too.
func TestFilterOverflowAttributes(t *testing.T) {
	cl := overflowLake(t)
	for _, tc := range []struct {
		k, v string
		want int
	}{
		{"attr.common", "x", 10}, // the one column
		{"attr.user", "u1", 3},   // overflow, string
		{"attr.n", "7", 1},       // overflow, int
		{"attr.n", "x", 0},
		{"attr.ratio", "1.5", 1}, // overflow, double
		{"attr.ok", "true", 5},   // overflow, bool
		{"attr_re.user", "u[12]", 6},
		{"attr_re.n", "[0-4]", 5},
		{"resource.k8s.pod", "pod-1", 10}, // resource overflow
		{"attr.missing", "x", 0},
	} {
		if got := len(cl.all("/api/v1/logs/search", wide(tc.k, tc.v), 100)); got != tc.want {
			t.Errorf("%s=%s: %d records, want %d", tc.k, tc.v, got, tc.want)
		}
	}
}

// overflowLake serves one logs file written at max_attribute_columns 1:
// ten records whose attributes but "common" (and resource ones but
// service.name) are in the overflow columns.
func overflowLake(t *testing.T) *client {
	dir := t.TempDir()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	store := lake.NewLocalStore(dir)
	w, err := lake.NewWriter(lake.Options{Store: store, MaxAttributeColumns: 1,
		Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }},
		func(s lake.Segment) error { return cat.AddSegments(ctx, s.CatalogRow()) })
	if err != nil {
		t.Fatal(err)
	}
	l := new(signal.Logs)
	c := &l.Common
	key := func(k string) signal.KeyID { return c.Keys.IDString(k) }
	start := uint32(c.Attrs.Len())
	c.Attrs.Append(key("service.name"), signal.ValueString, uint64(c.AppendString("svc")))
	c.Attrs.Append(key("k8s.pod"), signal.ValueString, uint64(c.AppendString("pod-1")))
	c.Resources = append(c.Resources, signal.Resource{Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())}})
	c.Scopes = append(c.Scopes, signal.Scope{})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := range 10 {
		j := l.AppendRecord(0, 0)
		l.Time[j] = base + int64(i)
		l.BodyType[j] = signal.ValueString
		l.Body[j] = uint64(c.AppendString(fmt.Sprint("r", i)))
		s := uint32(c.Attrs.Len())
		c.Attrs.Append(key("common"), signal.ValueString, uint64(c.AppendString("x")))
		c.Attrs.Append(key("user"), signal.ValueString, uint64(c.AppendString(fmt.Sprint("u", i%3))))
		c.Attrs.Append(key("n"), signal.ValueInt, uint64(i))
		c.Attrs.Append(key("ratio"), signal.ValueDouble, math.Float64bits(float64(i)/2))
		c.Attrs.Append(key("ok"), signal.ValueBool, uint64(i%2))
		l.Attr[j] = signal.Range{Start: s, End: uint32(c.Attrs.Len())}
	}
	if err := w.WriteLogs("default", l); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return serve(t, &testLake{dir: dir, cat: cat, store: store}, Options{})
}

// TestSearchReturnsOverflowAttributes: a log search returns the
// attributes a file keeps in its overflow columns with the others, typed
// as column attributes are (numbers, booleans, strings), resource ones too.
func TestSearchReturnsOverflowAttributes(t *testing.T) {
	cl := overflowLake(t)
	_, b := cl.get("/api/v1/logs/search", wide("attr.user", "u1", "limit", "100"))
	type rec struct {
		Body       string         `json:"body"`
		Attributes map[string]any `json:"attributes"`
		Resource   map[string]any `json:"resource"`
		Done       bool           `json:"done"`
	}
	var recs []rec
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r rec
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if !r.Done {
			recs = append(recs, r)
		}
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3: %s", len(recs), b)
	}
	for _, r := range recs {
		var i int
		if _, err := fmt.Sscanf(r.Body, "r%d", &i); err != nil {
			t.Fatalf("body %q", r.Body)
		}
		want := map[string]any{"common": "x", "user": fmt.Sprint("u", i%3), "n": float64(i),
			"ratio": float64(i) / 2, "ok": i%2 == 1}
		if !reflect.DeepEqual(r.Attributes, want) {
			t.Errorf("%s: attributes %v, want %v", r.Body, r.Attributes, want)
		}
		wantRes := map[string]any{"service.name": "svc", "k8s.pod": "pod-1"}
		if !reflect.DeepEqual(r.Resource, wantRes) {
			t.Errorf("%s: resource %v, want %v", r.Body, r.Resource, wantRes)
		}
	}
}
