package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/receiver/prwreceiver"
)

type tenantRecorder struct {
	mu      sync.Mutex
	tenants []string
}

func (r *tenantRecorder) Consume(_ context.Context, req *otlpreceiver.Request) (otlpreceiver.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tenants = append(r.tenants, req.Tenant)
	return otlpreceiver.Result{}, nil
}

// TestRemoteWriteBehindTheGuard: /api/v1/write needs a token with the
// write scope, and the tenant the guard resolves is the one the batch is
// handed over with (a token bound to a tenant cannot write another's).
func TestRemoteWriteBehindTheGuard(t *testing.T) {
	rec := &tenantRecorder{}
	rw, err := prwreceiver.New(prwreceiver.Config{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	tokens := append(append([]authn.Token(nil), testTokens...), authn.Token{Secret: "write-acme", Scope: authn.Write, Tenant: "acme"})
	base, _, _ := startAuth(t, Config{Tokens: tokens, RemoteWrite: rw})
	raw, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels: []prompb.Label{{Name: "__name__", Value: "up"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}}}}}).Marshal()
	body := snappy.Encode(nil, raw)
	post := func(token, tenant string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/write", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if tenant != "" {
			req.Header.Set("X-Scope-OrgID", tenant)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		token, tenant string
		code          int
	}{
		{"", "", 401},
		{"read-any", "", 403},
		{"write-any", "globex", 204},
		{"write-any", "", 204},
		{"write-acme", "", 204},
		{"write-acme", "globex", 403},
	} {
		if got := post(c.token, c.tenant); got != c.code {
			t.Errorf("token %q tenant %q: %d, want %d", c.token, c.tenant, got, c.code)
		}
	}
	want := []string{"globex", "default", "acme"}
	if len(rec.tenants) != len(want) {
		t.Fatalf("tenants %v, want %v", rec.tenants, want)
	}
	for i := range want {
		if rec.tenants[i] != want[i] {
			t.Fatalf("tenants %v, want %v", rec.tenants, want)
		}
	}
}
