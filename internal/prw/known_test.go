package prw

import (
	"bytes"
	"errors"
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
