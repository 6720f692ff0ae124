package prwexporter

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/snappy"

	"github.com/sluice-dev/sluice/internal/exporter/sending"
)

// TestSplitOnlyFillsItsOwnParts: the splitter of one endpoint's exporter
// (only) makes exactly the parts, byte for byte, that the splitter of
// every endpoint makes for that endpoint, on 1.0 and 2.0 records in
// groups of several (2.0 symbols once per part across the group), and
// leaves the other endpoints' parts empty.
func TestSplitOnlyFillsItsOwnParts(t *testing.T) {
	ring := sending.NewRing([]string{"http://a.invalid/w", "http://b.invalid/w", "http://c.invalid/w"})
	for _, v2 := range []bool{false, true} {
		var bodies [][]byte
		for r := range 3 {
			var body []byte
			if v2 {
				body = benchRecordV2(t, 300, r*200)
			} else {
				body = benchRecordV1(t, 300, r*200)
			}
			raw, err := snappy.Decode(nil, body)
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, raw)
		}
		split := func(only int) *splitter {
			s := newSplitter(2, true, ring, 3)
			s.only = only
			s.reset(v2)
			for _, b := range bodies {
				if err := s.add(b); err != nil {
					t.Fatal(err)
				}
			}
			s.finish()
			return s
		}
		all := split(-1)
		for only := range 3 {
			s := split(only)
			for b := range s.parts {
				got, want := s.parts[b], all.parts[b]
				if b/2 != only {
					if got.series != 0 || (v2 && len(got.body) != 0) {
						t.Fatalf("v2=%v only=%d: part %d of another endpoint holds %d series", v2, only, b, got.series)
					}
					continue
				}
				if got.series != want.series || !bytes.Equal(got.body, want.body) {
					t.Fatalf("v2=%v only=%d: part %d differs: %d series, %d bytes; every endpoint's splitter: %d, %d",
						v2, only, b, got.series, len(got.body), want.series, len(want.body))
				}
				if got.series == 0 {
					t.Fatalf("v2=%v: part %d empty: the test shows nothing", v2, b)
				}
			}
		}
	}
}
