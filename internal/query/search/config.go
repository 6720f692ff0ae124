package search

import (
	"log/slog"
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/config"
)

// FromConfig derives Options from the sluice config, as the query server
// mounts the handler: the ingestion tenant header and default tenant, and
// the query section's timeout and max_bytes (0 there means no limit).
// Rows scanned and the largest limit keep their defaults.
func FromConfig(c config.Config, log *slog.Logger, reg prometheus.Registerer) Options {
	o := Options{
		TenantHeader:  c.Receivers.OTLP.TenantHeader,
		DefaultTenant: c.Receivers.OTLP.DefaultTenant,
		Logger:        log,
		Registerer:    reg,
	}
	o.Limits.Timeout = c.Query.Timeout.D()
	o.Limits.MaxBytesScanned = int64(c.Query.MaxBytes)
	if o.Limits.MaxBytesScanned == 0 {
		o.Limits.MaxBytesScanned = math.MaxInt64
	}
	return o
}
