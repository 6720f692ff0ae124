package cli

import (
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/pipeline"
)

// runFlags are the options of `sluice run` that override the config file.
type runFlags struct {
	config                              string
	lake, grpcAddr, httpAddr, adminAddr string
}

func (f *runFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.config, "config", "", "YAML config file (default: the embedded defaults, see docs/config.md)")
	fl.StringVar(&f.lake, "lake", "", "lake root directory (lake.root; queue and catalog follow unless set in the file)")
	fl.StringVar(&f.grpcAddr, "grpc-addr", "", `OTLP/gRPC listen address (receivers.otlp.grpc_addr; "" disables)`)
	fl.StringVar(&f.httpAddr, "http-addr", "", `OTLP/HTTP listen address (receivers.otlp.http_addr; "" disables)`)
	fl.StringVar(&f.adminAddr, "admin-addr", "", `admin address for /metrics, /healthz, /readyz (admin.addr; "" disables)`)
}

// load reads the config and applies the flags the user set.
func (f *runFlags) load(c *cobra.Command) (config.Config, error) {
	cfg, err := config.Load(f.config)
	if err != nil {
		return cfg, err
	}
	set := c.Flags().Changed
	if set("lake") {
		cfg.Lake.Root = f.lake
		cfg.Override("lake.root")
	}
	if set("grpc-addr") {
		cfg.Receivers.OTLP.GRPCAddr = f.grpcAddr
		cfg.Override("receivers.otlp.grpc_addr")
	}
	if set("http-addr") {
		cfg.Receivers.OTLP.HTTPAddr = f.httpAddr
		cfg.Override("receivers.otlp.http_addr")
	}
	if set("admin-addr") {
		cfg.Admin.Addr = f.adminAddr
		cfg.Override("admin.addr")
	}
	return cfg, nil
}

// configLine is the "line N: " (or yaml's "yaml: line N: ") that config
// errors start with.
var configLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// printProblems writes one line per config problem, as FILE:LINE: KEY:
// PROBLEM where the line is known, and returns errConfig so that Main
// exits 2 without repeating them.
func printProblems(w io.Writer, src string, err error) error {
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "config "+src+": ")
		if line == "" || line == "yaml: unmarshal errors:" {
			continue
		}
		at := src
		if m := configLine.FindStringSubmatch(line); m != nil {
			at, line = src+":"+m[1], line[len(m[0]):]
		}
		fmt.Fprintf(w, "sluice: %s: %s\n", at, line)
	}
	return errConfig
}

// loadChecked loads the config as sluice run does and makes every check
// sluice run makes before it starts (config.Validate, then
// pipeline.Validate); problems are printed, naming src, and the error is
// errConfig.
func (f *runFlags) loadChecked(c *cobra.Command, src string) (config.Config, error) {
	cfg, err := f.load(c)
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil {
		err = pipeline.Validate(&cfg)
	}
	if err != nil {
		return cfg, printProblems(c.ErrOrStderr(), src, err)
	}
	return cfg, nil
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [--config FILE]",
		Short: "Receive OTLP and write it into the lake (the long-running server)",
		Long: `Run the sluice server: OTLP over gRPC and HTTP in, a durable on-disk queue, the
Parquet lake and its catalog out, with /metrics, /healthz and /readyz on the admin
address.

A request is acknowledged only once it is fsynced in the queue. The queue is written
into the lake and committed to the catalog at checkpoints (lake.flush_interval), so
nothing acknowledged is lost and nothing is written twice, even after kill -9.
SIGTERM or SIGINT stops the receivers, commits everything queued and exits 0 within
shutdown_timeout.

Prometheus remote write is received on the query address (POST /api/v1/write) and, with
receivers.prometheus_remote_write.listen, on an address of its own. Exporters forward
what is received (OTLP, remote write); pipelines without the lake make a forward-only
relay (no lake, catalog or query API).

Without --config the embedded defaults apply; every key is in docs/config.md.`,
		Example: `  sluice run
  sluice run --config sluice.yaml
  sluice run --lake /srv/lake --http-addr 0.0.0.0:4318 --grpc-addr 0.0.0.0:4317`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			errOut := c.ErrOrStderr()
			src := f.config
			if src == "" {
				src = "defaults"
			}
			cfg, err := f.loadChecked(c, src)
			if err != nil {
				return err
			}
			log := pipeline.NewLogger(cfg.Log, errOut)
			return pipeline.Run(c.Context(), cfg, pipeline.Settings{Logger: log}, func(p *pipeline.Pipeline) {
				a := p.Addrs()
				lakeRoot := cfg.Lake.Root
				if !cfg.LakeEnabled() {
					lakeRoot = "off"
				}
				fmt.Fprintf(c.OutOrStdout(), "sluice run: listening otlp-grpc=%s otlp-http=%s admin=%s lake=%s query=%s prw=%s\n",
					addr(a.GRPC), addr(a.HTTP), addr(a.Admin), lakeRoot, addr(a.Query), addr(a.RemoteWrite))
			})
		},
	}
	f.register(c)
	return c
}

func addr(a net.Addr) string {
	if a == nil {
		return "off"
	}
	return a.String()
}

func newValidateCmd() *cobra.Command {
	var (
		f     runFlags
		print bool
	)
	c := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "Check a `sluice run` config file",
		Long: `Parse and check a config file the way 'sluice run' would, without opening or
binding anything. Prints "config OK", or every problem (each as FILE:LINE: KEY:
PROBLEM) and exits 2, as 'sluice run' does with a config it refuses. The run flags (--lake, --grpc-addr, ...) are applied first, as in 'sluice run'.`,
		Example: `  sluice validate --config sluice.yaml
  sluice validate --config sluice.yaml --print   # the effective config, secrets redacted`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if f.config == "" {
				return usageError{fmt.Errorf("validate needs --config FILE (see '%s --help')", c.CommandPath())}
			}
			cfg, err := f.loadChecked(c, f.config)
			if err != nil {
				return err
			}
			if print {
				fmt.Fprint(c.OutOrStdout(), cfg.Redacted().YAML())
			}
			fmt.Fprintln(c.OutOrStdout(), "config OK")
			return nil
		},
	}
	f.register(c)
	c.Flags().BoolVar(&print, "print", false, "print the effective configuration (defaults, file and flags; secrets redacted)")
	return c
}
