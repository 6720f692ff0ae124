package search

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
)

func TestFromConfig(t *testing.T) {
	c, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	c.Receivers.OTLP.TenantHeader = "X-Scope-OrgID"
	c.Receivers.OTLP.DefaultTenant = "acme"
	c.Query.Timeout = config.Duration(7 * time.Second)
	c.Query.MaxBytes = 0
	o := FromConfig(c, nil, nil)
	if o.TenantHeader != "X-Scope-OrgID" || o.DefaultTenant != "acme" || o.Limits.Timeout != 7*time.Second ||
		o.Limits.MaxBytesScanned != math.MaxInt64 {
		t.Fatalf("FromConfig: %+v", o)
	}
	c.Query.MaxBytes = 1 << 20
	if o := FromConfig(c, nil, nil); o.Limits.MaxBytesScanned != 1<<20 {
		t.Fatalf("max_bytes: %d", o.Limits.MaxBytesScanned)
	}
}
