package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
)

// TestAudinRemoteWriteAuthAndTenants: with query.auth tokens, remote write
// on the query address and on its own listener answers 401 without a
// token or with a wrong one, 403 for a read-only token and for a
// tenant-bound token naming another tenant, 204 for a write token; what a
// tenant wrote is visible to that tenant only.
func TestAudinRemoteWriteAuthAndTenants(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
  prometheus_remote_write:
    listen: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
query:
  addr: %s
  auth:
    tokens:
      - {token: rtok, scope: read}
      - {token: wtok, scope: write}
      - {token: rwtok, scope: readwrite}
      - {token: atok, scope: readwrite, tenant: alpha}
lake:
  root: %s
shutdown_timeout: %s
`, qaddr, lakeDir, runShutdownTimeout)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, p)
	if s.prw == "" || s.prw == "off" {
		t.Fatalf("no remote write listener: %q", s.prw)
	}
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	for _, addr := range []string{qaddr, s.prw} {
		base := "http://" + addr
		send := func(token, tenant, name string) (int, string) {
			pb, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: name}},
				Samples: []prompb.Sample{{Value: 1, Timestamp: t0}}}}}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			var hdr []string
			if token != "" {
				hdr = append(hdr, "Authorization", "Bearer "+token)
			}
			if tenant != "" {
				hdr = append(hdr, "X-Scope-OrgID", tenant)
			}
			code, body, _ := postRW(t, base, "application/x-protobuf", pb, hdr...)
			return code, body
		}
		for _, c := range []struct {
			token, tenant string
			want          int
			body          string
		}{
			{"", "", http.StatusUnauthorized, "missing bearer token"},
			{"nope", "", http.StatusUnauthorized, "invalid bearer token"},
			{"rtok", "", http.StatusForbidden, "needs write"},
			{"atok", "beta", http.StatusForbidden, "tenant"},
			{"wtok", "", http.StatusNoContent, ""},
			{"wtok", "beta", http.StatusNoContent, ""},
			{"atok", "", http.StatusNoContent, ""},
		} {
			name := "aa_" + c.token + "_" + c.tenant + "x"
			if code, body := send(c.token, c.tenant, name); code != c.want || !strings.Contains(body, c.body) {
				t.Fatalf("%s token %q tenant %q: %d %s, want %d naming %q", addr, c.token, c.tenant, code, body, c.want, c.body)
			}
		}
	}
	names := func(token, tenant string) string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+qaddr+"/api/v1/series?"+url.Values{"match[]": {`{__name__=~"aa_.*"}`}}.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if tenant != "" {
			req.Header.Set("X-Scope-OrgID", tenant)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		fmt.Fprint(&b, resp.StatusCode, " ")
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return b.String()
	}
	for _, c := range []struct{ token, tenant, want string }{
		{"rwtok", "", `200 {"status":"success","data":[{"__name__":"aa_wtok_x"}]}`},
		{"rtok", "beta", `200 {"status":"success","data":[{"__name__":"aa_wtok_betax"}]}`},
		{"atok", "", `200 {"status":"success","data":[{"__name__":"aa_atok_x"}]}`},
		{"wtok", "", `403 `},
	} {
		if got := names(c.token, c.tenant); !strings.HasPrefix(got, c.want) {
			t.Fatalf("series for token %q tenant %q: %s, want %s", c.token, c.tenant, got, c.want)
		}
	}
}
