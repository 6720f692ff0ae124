package prwreceiver

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/authn"
)

// TestListenAuth: remote write on a listener of its own, behind the query
// address's tokens: no token 401, a read-only token 403, a write token
// 204 with the token's tenant, other paths 404 (after authentication).
func TestListenAuth(t *testing.T) {
	rec := &recorder{}
	h, err := New(Config{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Listen(context.Background(), ListenConfig{Addr: "127.0.0.1:0", Area: "prw_test", TenantHeader: "X-Scope-OrgID",
		Tokens: []authn.Token{{Secret: "reader", Scope: authn.Read}, {Secret: "writer", Scope: authn.Write, Tenant: "team-a"}}}, h)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	raw, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "up"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: 1_700_000_000_000}}}}}).Marshal()
	body := snappy.Encode(nil, raw)
	do := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+srv.Addr().String()+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{Path, "", http.StatusUnauthorized},
		{Path, "wrong", http.StatusUnauthorized},
		{Path, "reader", http.StatusForbidden},
		{"/api/v1/query", "writer", http.StatusNotFound},
		{Path, "writer", http.StatusNoContent},
	} {
		if got := do(tc.path, tc.token); got != tc.want {
			t.Errorf("POST %s with token %q: %d, want %d", tc.path, tc.token, got, tc.want)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.points != 1 || len(rec.tenants) != 1 || rec.tenants[0] != "team-a" {
		t.Fatalf("consumer got %d points for tenants %v; want 1 for team-a", rec.points, rec.tenants)
	}
}
