package prwexporter

import (
	"fmt"
	"testing"

	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/prw"
)

// FuzzMergeV2: any request the receiver's 2.0 scan takes (the only ones
// the exporter merges) merged with itself and with a second request
// decodes as the requests one after the other: every reference shifted
// right, none lost.
func FuzzMergeV2(f *testing.F) {
	mk := func(n int) []byte {
		st := writev2.NewSymbolTable()
		req := &writev2.Request{}
		for s := range n {
			refs := []uint32{st.Symbolize("__name__"), st.Symbolize(fmt.Sprintf("m%d", s%3)), st.Symbolize("i"), st.Symbolize(fmt.Sprint(s))}
			req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: refs,
				Samples:  []writev2.Sample{{Value: float64(s), Timestamp: 1_800_000_000_000 + int64(s), StartTimestamp: 5}},
				Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("h"), UnitRef: st.Symbolize("u")}})
		}
		req.Symbols = st.Symbols()
		b, _ := req.Marshal()
		return b
	}
	f.Add(mk(1))
	f.Add(mk(200))
	other := mk(150)
	f.Fuzz(func(t *testing.T, body []byte) {
		var s prw.Scanner
		if !s.ScanV2(body) {
			return
		}
		e := &Exporter{}
		for _, second := range [][]byte{body, other} {
			syms, series, k, ok := e.appendShiftedV2(nil, nil, body, 0)
			if !ok {
				t.Fatal("a scanned request could not be merged first")
			}
			syms, series, _, ok = e.appendShiftedV2(syms, series, second, uint64(k))
			if !ok {
				t.Fatal("a scanned request could not be merged second")
			}
			merged := append(syms, series...)
			// Help aside: one request keeps one help per family, the
			// first one, as a merged 1.0 request does.
			if got, want := renderV2(t, merged, false), renderV2(t, body, false)+renderV2(t, second, false); got != want {
				t.Fatalf("the merged request decodes to\n%s\nwant\n%s", got, want)
			}
		}
	})
}
