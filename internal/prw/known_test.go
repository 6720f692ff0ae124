package prw

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestLabelPastSeriesEndIsMalformed: a label field of a series named as
// the previous series' (the path that matches names by words) whose value
// runs past the end of its TimeSeries is malformed, however well the
// bytes after it parse: the value would alias the next series.
func TestLabelPastSeriesEndIsMalformed(t *testing.T) {
	req := &prompb.WriteRequest{}
	for i := range 3 {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			// no samples: the labels are the whole series
			Labels: []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "job", Value: "j" + string(rune('a'+i))}},
		})
	}
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// The second series' job label: 0a 09 0a 03 'job' 12 02 'jb'. Make its
	// value (and the label field) 2 bytes longer, past the series' end,
	// into the third series' tag and length.
	at := bytes.Index(body, []byte("\x0a\x09\x0a\x03job\x12\x02jb"))
	if at < 0 {
		t.Fatalf("label not found in % x", body)
	}
	bad := bytes.Clone(body)
	bad[at+1] += 2
	bad[at+8] += 2
	var m signal.Metrics
	var d Decoder
	if _, err := d.DecodeV1(&m, bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeV1 = %v, want ErrMalformed", err)
	}
	if m.Len() != 0 {
		t.Fatalf("%d points appended", m.Len())
	}
	// The same request intact decodes (no samples: no points, no error).
	if _, err := d.DecodeV1(&m, body); err != nil {
		t.Fatal(err)
	}
}

// TestFamilyMemo: 1.0 metric names are found by their length and first
// and last words (famMemo) before the map: names that share those but
// differ in the middle, names of 8 and 16 bytes, short names (the map
// only) and a second request on the same Decoder (its families numbered
// anew) all get a descriptor of their own name, one per name, and the
// series ids ComputeSeriesIDs gives.
func TestFamilyMemo(t *testing.T) {
	names := []string{
		"abcdefgh0_12345678", "abcdefgh1_12345678", "abcdefgh22345678x", // 17-18 bytes: same first and last words
		"abcdefgh0_12345678", "metric_8", "metric_16_bytes_", "m7chars", "abcdefgh1_12345678",
		"metric_16_bytes_", "metric_8", "abcdefgh0_12345678",
	}
	for round, rot := range []int{0, 3} {
		req := &prompb.WriteRequest{}
		for i := range names {
			n := names[(i+rot)%len(names)]
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: n}, {Name: "i", Value: string(rune('a' + i))}},
				Samples: []prompb.Sample{{Value: float64(i), Timestamp: int64(i)}},
			})
		}
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var d Decoder
		for call := range 2 { // the same Decoder again: call numbers
			var m signal.Metrics
			if _, err := d.DecodeV1(&m, body); err != nil {
				t.Fatal(err)
			}
			if m.Len() != len(names) {
				t.Fatalf("%d points", m.Len())
			}
			distinct := map[string]bool{}
			for p := range m.Len() {
				got := string(m.Bytes(m.Descs[m.Desc[p]].Name))
				if want := names[(p+rot)%len(names)]; got != want {
					t.Fatalf("round %d call %d: point %d named %q, want %q", round, call, p, got, want)
				}
				distinct[got] = true
			}
			if len(m.Descs) != len(distinct) {
				t.Fatalf("%d descriptors for %d names", len(m.Descs), len(distinct))
			}
			ids := slices.Clone(m.SeriesID)
			m.ComputeSeriesIDs()
			if !slices.Equal(ids, m.SeriesID) {
				t.Fatal("series ids differ from ComputeSeriesIDs's")
			}
		}
	}
}
