package prw

import (
	"fmt"
	"testing"

	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// A 2.0 series with metadata and no sample, histogram or exemplar has no
// point to carry its metadata: MetadataOnlyV1 gives it as 1.0 metadata
// (family = the series' name), and only it: not the metadata of series
// with points, not an empty Metadata message (no metadata), not an
// invalid series'. The next call starts empty. Before, it was lost.
func TestMetadataOnlyV1(t *testing.T) {
	syms := []string{"", "__name__", "only_total", "Requests.", "requests", "with_samples", "Samples.", "empty", "bad\xff", "ex_only", "trace_id", "abc"}
	req := &writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 2}, Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: 3, UnitRef: 4}},
		{LabelsRefs: []uint32{1, 5}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0ms}}, Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: 6}},
		{LabelsRefs: []uint32{1, 7}}, // an empty Metadata message
		{LabelsRefs: []uint32{1, 2, 0, 2}, Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE}}, // an empty label name: invalid
		{LabelsRefs: []uint32{1, 9}, Exemplars: []writev2.Exemplar{{LabelsRefs: []uint32{10, 11}, Value: 1, Timestamp: t0ms}},
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE}},
	}}
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var d Decoder
	var m signal.Metrics
	if _, err := d.DecodeV2(&m, body); err == nil {
		t.Fatal("the invalid series was taken")
	}
	ms, skipped, err := FamilyMetadataV1(d.MetadataOnlyV1())
	if err != nil || skipped != 0 {
		t.Fatalf("MetadataOnlyV1 does not read as 1.0 metadata: %v, %d skipped", err, skipped)
	}
	if got, want := fmt.Sprint(ms), fmt.Sprint([]FamilyMetadata{{Name: "only_total", Type: "counter", Help: "Requests.", Unit: "requests"}}); got != want {
		t.Fatalf("MetadataOnlyV1 = %s, want %s", got, want)
	}
	m.Reset()
	if _, err := d.DecodeV2(&m, body[:0]); err != nil || len(d.MetadataOnlyV1()) != 0 {
		t.Fatalf("after an empty request: %v, %d bytes of metadata", err, len(d.MetadataOnlyV1()))
	}
}
