package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestTopFetcherAgainstWhatAnswers: `sluice top` against endpoints that are
// not a healthy sluice. Each failure names the URL and the HTTP status and
// says what is wrong in words (not only a JSON parser's complaint), never
// passes a terminal escape from the answer on, and a slow endpoint is
// given up with the context.
func TestTopFetcherAgainstWhatAnswers(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		ctype  string
		body   string
		want   []string
	}{
		{"a proxy's login page", 200, "text/html", "<html><body>Sign in</body></html>", []string{"200 OK", "text/html", "not a sluice status document"}},
		{"auth required", 401, "application/json", `{"status":"error","errorType":"unauthorized","error":"missing bearer token"}`,
			[]string{"401 Unauthorized", "missing bearer token", "--token"}},
		{"a plain-text 401", 401, "text/plain", "Unauthorized\n", []string{"401 Unauthorized", "text/plain", "not a sluice status document"}},
		{"another Prometheus API", 200, "application/json", `{"status":"success","data":{"resultType":"vector","result":[]}}`,
			[]string{"200 OK", "not a sluice status document"}},
		{"no data", 200, "application/json", `{"status":"success"}`, []string{"no status document"}},
		{"an error with an escape", 500, "application/json", `{"status":"error","error":"boom\u001b]0;pwned\u0007"}`,
			[]string{"500 Internal Server Error", `boom\x1b]0;pwned\x07`}},
		{"a cut answer", 200, "application/json", `{"status":"success","data":{"time":1,"recei`, []string{"not a sluice status document"}},
		{"garbage bytes", 200, "", "\x00\xff\x1b[2J", []string{"not a sluice status document"}},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.ctype != "" {
				w.Header().Set("Content-Type", c.ctype)
			}
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}))
		u, err := statusURL(srv.URL, 10)
		if err != nil {
			t.Fatal(err)
		}
		_, err = statusFetcher(u, "", "")(context.Background())
		srv.Close()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		msg := err.Error()
		for _, w := range append(c.want, u) {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q lacks %q", c.name, msg, w)
			}
		}
		if strings.ContainsAny(msg, "\x1b\x07\x00") {
			t.Errorf("%s: error passes a control character on: %q", c.name, msg)
		}
	}

	// A server that never answers: the fetch ends with its context.
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := statusFetcher(srv.URL+"/api/v1/status/sluice", "", "")(ctx); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("hanging server: %v after %v", err, time.Since(start))
	}
}
