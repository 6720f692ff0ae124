package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/httpserve"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/pipeline"
	"github.com/sluice-dev/sluice/internal/query/httpapi"
)

// defaultQueryAddr is where query-server listens without --addr or
// query.addr.
const defaultQueryAddr = "localhost:9090"

func newQueryServerCmd() *cobra.Command {
	var (
		lf         lakeFlags
		s3f        s3Flags
		addr, file string
		adminAddr  string
	)
	c := &cobra.Command{
		Use:   "query-server [--lake DIR] [--addr HOST:PORT] [--config FILE]",
		Short: "Serve the Prometheus query API over the lake (read-only)",
		Long: `Serve the Prometheus HTTP API (/api/v1/query, query_range, series, labels,
label/<name>/values, metadata) over the metrics of the lake, read-only: it takes
no lock and writes no lake files, so it runs beside a 'sluice run' or 'sluice ingest'
on the same lake and sees their data as they commit it to the catalog.

Use it as a Prometheus data source in Grafana, or with promtool:
  promtool query instant http://127.0.0.1:9090 'sum by (service_name) (rate(http_server_request_duration_seconds_count[5m]))'

With --config, the query section (limits, timeout, auth tokens, TLS),
receivers.otlp.tenant_header and default_tenant, lake.root, lake.s3 and
catalog.dsn of that file apply; flags override them. Without query.auth.tokens
the API answers anyone who reaches --addr. The name mapping from OTLP, the
authentication and the limits are in docs/query.md.

--admin-addr serves /metrics (the query API's requests, durations, admission
queue, refused connections and lake reads, as 'sluice run' exposes them),
/healthz and /readyz on their own address, without authentication, as the
admin server of 'sluice run' does. admin.addr of --config is not used: it is
the address of the 'sluice run' this server usually runs beside.`,
		Example: `  sluice query-server --lake ./data
  sluice query-server --lake ./data --addr 0.0.0.0:9090 --config sluice.yaml
  sluice query-server --lake ./state --catalog postgres://sluice@db/sluice --s3-bucket lake
  sluice query-server --lake ./data --addr :9091 --admin-addr :9465`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			errOut := c.ErrOrStderr()
			cfg, err := config.Load(file)
			if err != nil {
				return printProblems(errOut, srcName(file), err)
			}
			set := c.Flags().Changed
			if set("lake") || file == "" {
				cfg.Lake.Root = lf.root
			}
			if set("catalog") {
				cfg.Catalog.DSN = lf.catalog
			}
			switch {
			case set("addr"):
				cfg.Query.Addr = addr
			case cfg.Query.Addr == "":
				cfg.Query.Addr = defaultQueryAddr
			}
			if err := cfg.Validate(); err != nil {
				return printProblems(errOut, srcName(file), err)
			}
			if cfg.Query.Addr == "" {
				return usageError{fmt.Errorf("query-server needs an address: --addr HOST:PORT")}
			}
			dsn := cfg.CatalogDSN()
			if p, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
				// A read-only server must not create an empty catalog.
				if _, err := os.Stat(p); err != nil {
					return fmt.Errorf("no catalog at %s (ingest into the lake first, or pass --catalog): %w", p, err)
				}
			}
			store, err := queryStore(ctx, &s3f, cfg)
			if err != nil {
				return err
			}
			cat, err := catalog.Open(ctx, dsn)
			if err != nil {
				return fmt.Errorf("open catalog: %w", err)
			}
			defer cat.Close()
			log := pipeline.NewLogger(cfg.Log, errOut)
			hc := httpapi.FromConfig(cfg)
			hc.StatusFromLake = true // no live statistics here: count the lake's recent series
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			srv, err := httpapi.Start(ctx, cfg.Query.Addr, hc, cat, store, log, reg)
			if err != nil {
				return err
			}
			shutdown := func(s interface{ Shutdown(context.Context) error }) error {
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return s.Shutdown(sctx)
			}
			admin := ""
			if adminAddr != "" {
				// The admin server of sluice run, over this process's registry.
				as, err := httpserve.StartAdmin(ctx, "--admin-addr", adminAddr, httpserve.Admin{Registry: reg, Pprof: cfg.Admin.Pprof}, log)
				if err != nil {
					_ = shutdown(srv)
					return err
				}
				defer shutdown(as)
				admin = " admin=" + as.Addr().String()
			}
			fmt.Fprintf(c.OutOrStdout(), "sluice query-server: listening query=%s%s lake=%s\n", srv.Addr(), admin, cfg.Lake.Root)
			<-ctx.Done()
			return shutdown(srv)
		},
	}
	lf.register(c)
	s3f.register(c)
	c.Flags().StringVar(&addr, "addr", "", "listen address (query.addr; default "+defaultQueryAddr+"); port 0 picks a free port")
	c.Flags().StringVar(&adminAddr, "admin-addr", "", "serve /metrics, /healthz and /readyz on this address (off by default); port 0 picks a free port")
	c.Flags().StringVar(&file, "config", "", "YAML config file: query limits, tenant header, lake and catalog (docs/config.md)")
	return c
}

func srcName(file string) string {
	if file == "" {
		return "defaults"
	}
	return file
}

// queryStore is the store of the lake files: --s3-bucket, else lake.s3 of
// the config, else the local lake root.
func queryStore(ctx context.Context, f *s3Flags, cfg config.Config) (lake.Store, error) {
	st, err := f.store(ctx)
	if err != nil || st != nil {
		return st, err
	}
	if s := cfg.Lake.S3; s.Enabled() {
		st, err := s3store.New(ctx, s3store.Config{
			Bucket: s.Bucket, Prefix: s.Prefix, Region: s.Region, Endpoint: s.Endpoint,
			AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, SessionToken: s.SessionToken,
			ForcePathStyle: s.ForcePathStyle, MaxRetries: s.MaxRetries,
		})
		if err != nil {
			return nil, fmt.Errorf("lake.s3: %w", err)
		}
		return st, nil
	}
	root, err := filepath.Abs(cfg.Lake.Root)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("lake root %s is not a directory", root)
	}
	return lake.NewLocalStore(root), nil
}
