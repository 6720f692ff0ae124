package prwreceiver

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// An empty body, 1.0 or 2.0, is 400 naming it (not snappy's "corrupt
// input"), with no Written headers, and nothing reaches the consumer.
func TestEmptyBody(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec)
	for _, ct := range []string{ctV1, ctV2} {
		resp := post(t, srv.URL, ct, "snappy", nil)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "empty body") || resp.Header.Get(HeaderSamples) != "" {
			t.Fatalf("%s: %d %q %v, want 400 naming the empty body", ct, resp.StatusCode, b, resp.Header)
		}
	}
	if rec.points != 0 || len(rec.tenants) != 0 {
		t.Fatalf("the consumer got %d points", rec.points)
	}
}
