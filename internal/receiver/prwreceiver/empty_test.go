package prwreceiver

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// An empty body, 1.0 or 2.0, is 400 naming it (not snappy's "corrupt
// input"), with Written headers of 0 in 2.0 (none in 1.0), and nothing
// reaches the consumer.
func TestEmptyBody(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec)
	for _, ct := range []string{ctV1, ctV2} {
		resp := post(t, srv.URL, ct, "snappy", nil)
		b, _ := io.ReadAll(resp.Body)
		want := ""
		if ct == ctV2 {
			want = "0"
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "empty body") || resp.Header.Get(HeaderSamples) != want {
			t.Fatalf("%s: %d %q %v, want 400 naming the empty body", ct, resp.StatusCode, b, resp.Header)
		}
	}
	if rec.points != 0 || len(rec.tenants) != 0 {
		t.Fatalf("the consumer got %d points", rec.points)
	}
}
