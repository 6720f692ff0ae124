package httpapi

import (
	"math"
	"testing"

	jsoniter "github.com/json-iterator/go"
	"github.com/prometheus/prometheus/util/jsonutil"
)

// Sample values and timestamps of vectors, matrices and exemplars are
// written byte for byte as Prometheus's API writes them (util/jsonutil):
// exponent form for tiny and huge values, milliseconds as three digits.
func TestPointFormatAsPrometheus(t *testing.T) {
	st := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(st)
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -2.5, 0.1, 1e-6, 9.99e-7, 5e-324, -1e-300, 1e21, 9.99e20, math.MaxFloat64,
		123456789.123456789, math.NaN(), math.Inf(1), math.Inf(-1), math.Float64frombits(0x7ff0000000000002)} {
		st.SetBuffer(nil)
		jsonutil.MarshalFloat(f, st)
		want := string(st.Buffer())
		if got := `"` + string(appendValue(nil, f)) + `"`; got != want {
			t.Errorf("value %v: %s, Prometheus writes %s", f, got, want)
		}
	}
	for _, ms := range []int64{0, 1, 5, 50, 500, 999, 1000, 1001, 1795713979100, 1795713979005, -1, -1500, 253402300799999} {
		st.SetBuffer(nil)
		jsonutil.MarshalTimestamp(ms, st)
		want := string(st.Buffer())
		if got := string(appendTimestamp(nil, ms)); got != want {
			t.Errorf("timestamp %d ms: %s, Prometheus writes %s", ms, got, want)
		}
	}
}
