package search

import (
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Concurrent queries through a file cache much smaller than the lake (so
// files are evicted while other queries use them) give the same answers
// as one query at a time.
func TestConcurrentQueries(t *testing.T) {
	copies := []copySpec{{"default", 0}, {"default", -2 * time.Hour}}
	tl := buildLake(t, 200, copies, nil)
	c := serve(t, tl, Options{FileCache: 2})
	queries := []struct {
		path string
		q    url.Values
	}{
		{"/api/v1/logs/search", wide("limit", "300")},
		{"/api/v1/logs/search", wide("severity_min", "warn", "limit", "50")},
		{"/api/v1/traces/search", wide("limit", "200")},
		{"/api/v1/traces/search", wide("min_duration", "1ms", "limit", "40")},
	}
	want := make([]string, len(queries))
	for i, q := range queries {
		_, b := c.get(q.path, q.q)
		want[i] = string(b)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 6; r++ {
				i := (g + r) % len(queries)
				code, b := c.get(queries[i].path, queries[i].q)
				if code != 200 || string(b) != want[i] {
					errs <- fmt.Errorf("goroutine %d query %d: %d, body differs from the serial answer", g, i, code)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
