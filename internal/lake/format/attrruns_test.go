package format_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// runsLogsJSON is an OTLP logs request of n records whose attributes come
// in runs: values that hold for a few rows, columns that are null for a
// stretch, array and map values, a column set every tenth row only.
func runsLogsJSON(n int) string {
	rng := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	sb.WriteString(`{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},` +
		`"scopeLogs":[{"scope":{"name":"s"},"logRecords":[`)
	run, tag, opt := 0, 0, 0
	for i := range n {
		if rng.IntN(4) == 0 {
			run++
		}
		if rng.IntN(6) == 0 {
			tag++
		}
		if rng.IntN(5) == 0 {
			opt = rng.IntN(3)
		}
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"timeUnixNano":"%d","body":{"stringValue":"b"},"attributes":[`, 1748781000000000000+int64(i)*1000)
		fmt.Fprintf(&sb, `{"key":"run","value":{"stringValue":"r%d"}},`, run%5)
		fmt.Fprintf(&sb, `{"key":"n","value":{"intValue":"%d"}},`, run/3)
		fmt.Fprintf(&sb, `{"key":"tags","value":{"arrayValue":{"values":[{"stringValue":"t%d"}]}}},`, tag)
		fmt.Fprintf(&sb, `{"key":"kv","value":{"kvlistValue":{"values":[{"key":"k","value":{"intValue":"%d"}}]}}},`, tag%2)
		if opt > 0 {
			fmt.Fprintf(&sb, `{"key":"opt","value":{"stringValue":"o%d"}},`, opt)
		}
		if opt == 2 {
			sb.WriteString(`{"key":"flag","value":{"boolValue":true}},`)
		}
		if i%10 == 0 {
			fmt.Fprintf(&sb, `{"key":"id","value":{"stringValue":"id-%d"}},`, i)
		}
		fmt.Fprintf(&sb, `{"key":"d","value":{"doubleValue":%d.5}}]}`, run%2)
	}
	sb.WriteString(`]}]}]}`)
	return sb.String()
}

// attrsOf is record i's attributes as "key=type:value" strings, sorted.
func attrsOf(c *signal.Common, r signal.Range) []string {
	var out []string
	for j := r.Start; j < r.End; j++ {
		v := fmt.Sprint(c.Attrs.Val[j])
		switch c.Attrs.Type[j] {
		case signal.ValueString, signal.ValueBytes, signal.ValueArray, signal.ValueMap:
			v = string(c.Bytes(signal.Str(c.Attrs.Val[j])))
		}
		out = append(out, fmt.Sprintf("%s=%d:%q", c.Keys.Name(c.Attrs.Key[j]), c.Attrs.Type[j], v))
	}
	sort.Strings(out)
	return out
}

// TestRecordAttrRuns: records whose attributes repeat the previous
// record's come back with the same attributes, typed and valued as
// written, and share the previous record's Range (one set stored per
// run), through the typed decoder and parquet-go's page reader alike; in
// files of one and of several row groups and pages, with attribute
// columns and with attributes in the overflow column.
func TestRecordAttrRuns(t *testing.T) {
	const n = 3000
	var in signal.Logs
	if err := otlp.DecodeLogsJSON(&in, []byte(runsLogsJSON(n))); err != nil {
		t.Fatal(err)
	}
	want := map[int64][]string{}
	for i := range in.Len() {
		want[in.Time[i]] = attrsOf(&in.Common, in.Attr[i])
	}
	for name, opts := range map[string]lake.Options{
		"default":  {},
		"small-rg": {RowGroupRows: 700},
		"overflow": {MaxAttributeColumns: 3, RowGroupRows: 1100},
	} {
		root := t.TempDir()
		var segs []lake.Segment
		opts.Root = root
		opts.Now = func() time.Time { return time.Unix(1748781000, 0) }
		w, err := lake.NewWriter(opts, func(s lake.Segment) error { segs = append(segs, s); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteLogs("t", &in); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if len(segs) != 1 {
			t.Fatalf("%s: %d files", name, len(segs))
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(segs[0].Path)))
		if err != nil {
			t.Fatal(err)
		}
		for _, legacy := range []bool{false, true} {
			f, err := format.OpenReader(bytes.NewReader(b), int64(len(b)), name)
			if err != nil {
				t.Fatal(err)
			}
			format.SetLegacyRead(f, legacy)
			var out signal.Logs
			if err := f.ReadLogs(&out); err != nil {
				t.Fatalf("%s (legacy %v): %v", name, legacy, err)
			}
			if out.Len() != n {
				t.Fatalf("%s (legacy %v): %d records, want %d", name, legacy, out.Len(), n)
			}
			groups := len(f.Parquet().RowGroups())
			equal, shared := 0, 0
			var prev []string
			for i := range out.Len() {
				got := attrsOf(&out.Common, out.Attr[i])
				if w := want[out.Time[i]]; !slices.Equal(got, w) {
					t.Fatalf("%s (legacy %v): record %d: attributes %v, want %v", name, legacy, i, got, w)
				}
				if i > 0 && slices.Equal(got, prev) {
					equal++
					if out.Attr[i] == out.Attr[i-1] {
						shared++
					}
				} else if i > 0 && out.Attr[i] == out.Attr[i-1] {
					t.Fatalf("%s (legacy %v): record %d shares the Range of a record with other attributes", name, legacy, i)
				}
				prev = got
			}
			// Every run shares its first record's set, but for the
			// records that start a row group.
			if equal == 0 || shared < equal-groups {
				t.Errorf("%s (legacy %v): %d of %d records repeating the previous record's attributes share its Range (%d row groups)",
					name, legacy, shared, equal, groups)
			}
			t.Logf("%s (legacy %v): %d row groups, %d of %d repeated sets shared, %d attributes stored for %d records",
				name, legacy, groups, shared, equal, out.Attrs.Len(), n)
		}
	}
}
