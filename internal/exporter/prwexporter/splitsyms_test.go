package prwexporter

import (
	"slices"
	"testing"

	"github.com/klauspost/compress/snappy"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"google.golang.org/protobuf/encoding/protowire"
)

// A lane's 2.0 request holds each symbol once (the specification's
// SHOULD), although the group's records each have a table of their own
// holding the same label names, values, help and unit: before, a symbol
// was added again for every record that used it. Every series still
// reads as sent, and a record that does not parse, undone, leaves the
// table consistent for the records after it.
func TestSplitV2SymbolsOnce(t *testing.T) {
	// Two records of 60 series, then one of 90 (30 series of labels the
	// first ones do not have) sent twice: first damaged at its end, so
	// the split undoes it after adding its new symbols to the parts, then
	// whole.
	recs := append(v2Records(t, 2, 60), v2Records(t, 1, 90)...)
	var want []string
	var bodies [][]byte
	for _, r := range recs {
		b, err := snappy.Decode(nil, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
		var req writev2.Request
		if err := req.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		for _, ts := range req.Timeseries {
			want = append(want, resolvedV2(t, req.Symbols, ts))
		}
	}
	// A last series whose label reference is past the symbols table.
	bad := protowire.AppendTag(slices.Clone(bodies[2]), 5, protowire.BytesType)
	bad = protowire.AppendBytes(bad, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{1, 0x7f}))
	s := newSplitter(2, false, nil, 1)
	s.reset(true)
	for i, b := range bodies {
		if i == 2 {
			if s.add(bad) == nil {
				t.Fatal("a damaged record was taken")
			}
		}
		if err := s.add(b); err != nil {
			t.Fatal(err)
		}
	}
	s.finish()
	var got []string
	for i := range s.parts {
		p := &s.parts[i]
		if p.series == 0 {
			t.Fatalf("part %d has no series: the test needs both lanes", i)
		}
		var req writev2.Request
		if err := req.Unmarshal(p.body); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, sym := range req.Symbols {
			if seen[sym] {
				t.Errorf("part %d: symbol %q twice in %d symbols", i, sym, len(req.Symbols))
			}
			seen[sym] = true
		}
		if req.Symbols[0] != "" {
			t.Errorf("part %d: first symbol %q, want \"\"", i, req.Symbols[0])
		}
		for _, ts := range req.Timeseries {
			got = append(got, resolvedV2(t, req.Symbols, ts))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the parts' series differ from the records':\ngot  %d %.300q\nwant %d %.300q", len(got), got, len(want), want)
	}
}
