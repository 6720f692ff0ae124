package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
)

// TestRemoteWriteTimesTheLakeCannotFile: `sluice run` refuses a remote-write
// series with a sample more than lake.max_future_skew ahead (400 naming
// it), as Prometheus refuses samples too far ahead, rather than
// acknowledge samples its PromQL API would never find (the lake files
// such a row by its arrival time); the request's other series are written
// and read back.
func TestRemoteWriteTimesTheLakeCannotFile(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	base := "http://" + qaddr
	now := time.Now().Add(-time.Minute).Truncate(time.Second)
	series := func(name string, ts int64) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "job", Value: "t"}},
			Samples: []prompb.Sample{{Value: 7, Timestamp: ts}}}
	}
	code, _, msg := rw1Post(t, base+"/api/v1/write", &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("times_ok", now.UnixMilli()),
		series("times_zero", 0),
		series("times_ahead", now.Add(72*time.Hour).UnixMilli()),
	}})
	if code != 400 || strings.Contains(msg, `"times_zero"`) || !strings.Contains(msg, `"times_ahead"`) || !strings.Contains(msg, "1 invalid series") {
		t.Fatalf("answer %d %q: want 400 naming times_ahead alone", code, msg)
	}
	got := promMatrix(t, base, `{job="t"}`, now)
	if len(got) != 1 || got[0].Metric["__name__"] != "times_ok" || got[0].Values[0][1] != "7" {
		t.Fatalf(`{job="t"} at %v: %v, want times_ok = 7 alone`, now, got)
	}
}
