package otlp

import (
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestSteadyStateAllocs proves that decoding into a reused batch does not
// allocate once its slices have grown.
func TestSteadyStateAllocs(t *testing.T) {
	logs := corpus(t, "logs")[0].data
	traces := corpus(t, "traces")[0].data
	var l signal.Logs
	var s signal.Spans
	decode := func() {
		l.Reset()
		s.Reset()
		if err := DecodeLogs(&l, logs); err != nil {
			t.Fatal(err)
		}
		if err := DecodeTraces(&s, traces); err != nil {
			t.Fatal(err)
		}
	}
	decode()
	if n := testing.AllocsPerRun(10, decode); n != 0 {
		t.Fatalf("%v allocations per decode, want 0", n)
	}
}

// TestAppendSeveral decodes every logs file into one batch: records of
// later requests append after earlier ones and all stay intact.
func TestAppendSeveral(t *testing.T) {
	var b signal.Logs
	var want []string
	for _, f := range corpus(t, "logs") {
		ld, _ := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(f.data)
		want = append(want, pdataLogs(ld)...)
		buf := slices.Clone(f.data)
		if err := DecodeLogs(&b, buf); err != nil {
			t.Fatal(err)
		}
		clear(buf) // the caller may reuse its buffer at once
	}
	sameRecords(t, "appended", want, batchLogs(t, &b))
}
