package prw

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

func TestFamilyMetadataV1(t *testing.T) {
	req := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "a_total"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}}}},
		Metadata: []prompb.MetricMetadata{
			{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "a_total", Help: "A."},
			{Type: prompb.MetricMetadata_HISTOGRAM, MetricFamilyName: "lat", Help: "Latency.", Unit: "seconds"},
			{Type: prompb.MetricMetadata_GAUGE, Help: "nameless"},
			{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "bad\xff", Help: "not UTF-8"},
			{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "long", Help: strings.Repeat("h", MaxMetadataText+1)},
			{Type: prompb.MetricMetadata_STATESET, MetricFamilyName: "st"},
			{Type: 99, MetricFamilyName: "odd"},
		},
	}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, skipped, err := FamilyMetadataV1(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []FamilyMetadata{
		{Name: "a_total", Type: "counter", Help: "A."},
		{Name: "lat", Type: "histogram", Help: "Latency.", Unit: "seconds"},
		{Name: "st", Type: "stateset"},
		{Name: "odd", Type: "unknown"},
	}
	if !slices.Equal(got, want) || skipped != 3 {
		t.Fatalf("got %v (skipped %d)\nwant %v (skipped 3)", got, skipped, want)
	}
	// Malformed: a truncated metadata message, a wrong wire type.
	for _, bad := range [][]byte{b[:len(b)-1], {0x1a, 0x05, 0x08}, {0x18, 0x01}, {0x1a, 0x02, 0x12, 0x05}} {
		if _, _, err := FamilyMetadataV1(bad); err == nil {
			t.Errorf("%x: no error", bad)
		}
	}
}

func TestFamilyOf(t *testing.T) {
	for name, want := range map[string][]string{
		"x":               {"x"},
		"x_total":         {"x_total", "x"},
		"x_bucket":        {"x_bucket", "x"},
		"x_count":         {"x_count", "x"},
		"_total":          {"_total"},
		"build_info":      {"build_info", "build"},
		"x_sum_total_sum": {"x_sum_total_sum", "x_sum_total"},
	} {
		var got []string
		for f := range FamilyOf(name) {
			got = append(got, f)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// FuzzFamilyMetadataV1: no panic on any input, and every request the
// decoder takes (whole or partly) gives its metadata without an error,
// each entry named, UTF-8 and within MaxMetadataText.
func FuzzFamilyMetadataV1(f *testing.F) {
	req := &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{
		{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "a_total", Help: "A.", Unit: "u"},
		{Type: prompb.MetricMetadata_GAUGE, Help: "nameless"},
	}}
	b, _ := req.Marshal()
	f.Add(b)
	b1, _ := benchBodies(5, 3)
	f.Add(b1)
	f.Add([]byte{0x1a, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) {
		ms, _, err := FamilyMetadataV1(body)
		var d Decoder
		var m signal.Metrics
		_, derr := d.DecodeV1(&m, body)
		var pe *PartialError
		if (derr == nil || errors.As(derr, &pe)) && err != nil {
			t.Fatalf("the decoder takes the request (%v), FamilyMetadataV1 does not: %v", derr, err)
		}
		for _, m := range ms {
			if m.Name == "" || len(m.Help)+len(m.Unit) > MaxMetadataText || !slices.Contains(typeNames[:], m.Type) || strings.ToValidUTF8(fmt.Sprint(m), "?") != fmt.Sprint(m) {
				t.Fatalf("entry %+v", m)
			}
		}
	})
}
