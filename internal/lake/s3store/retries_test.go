package s3store_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
)

// TestRetriesCounted: the SDK's retries against a failing S3 are bounded
// by MaxRetries and counted per operation, and so are the calls that fail
// after every attempt.
func TestRetriesCounted(t *testing.T) {
	srv := s3test.Start(t)
	proxy := s3test.NewFaultProxy(t, srv.Endpoint)
	reg := prometheus.NewRegistry()
	st := newStore(t, srv, "p", func(c *s3store.Config) {
		c.Endpoint = proxy.Endpoint
		c.MaxRetries = 3
		c.Registerer = reg
	})
	retries := func(op string) float64 {
		return counter(t, reg, "sluice_lake_s3_retries_total", op)
	}
	exhausted := func(op string) float64 {
		return counter(t, reg, "sluice_lake_s3_retries_exhausted_total", op)
	}

	// Two 503s, then the upload goes through on the third attempt.
	proxy.Set(func(op string, n int) int {
		if op == "put" && n <= 2 {
			return 503
		}
		return 0
	})
	put(t, st, "a.parquet", []byte("data"))
	if got := string(readAll(t, st, "a.parquet")); got != "data" {
		t.Fatalf("read back %q", got)
	}
	if r, e := retries("PutObject"), exhausted("PutObject"); r != 2 || e != 0 {
		t.Errorf("PutObject after two 503s: %v retries, %v exhausted; want 2, 0", r, e)
	}

	// A server that always answers 500: three attempts, then an error.
	proxy.Set(func(op string, n int) int {
		if op == "delete" {
			return 500
		}
		return 0
	})
	if err := st.Remove("a.parquet"); err == nil {
		t.Fatal("Remove succeeded while S3 answered 500 to every delete")
	}
	if r, e := retries("DeleteObject"), exhausted("DeleteObject"); r != 2 || e != 1 {
		t.Errorf("DeleteObject always 500: %v retries, %v exhausted; want 2, 1", r, e)
	}
	if f := proxy.Faults(); f != 5 {
		t.Errorf("the proxy answered %d requests itself, want 5 (2 puts, 3 deletes)", f)
	}

	// A second store on the same registry shares the counters.
	newStore(t, srv, "p", func(c *s3store.Config) { c.Endpoint = proxy.Endpoint; c.Registerer = reg })
}

// counter returns the value of the counter name for operation op in reg.
func counter(t *testing.T, reg *prometheus.Registry, name, op string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == op {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
