package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/lake"
)

// upkeepConfig is --config of the upkeep commands (compact, rollup,
// retention): the lake root, catalog, S3 bucket and upkeep settings of a
// 'sluice run' config, so a command run by hand or from cron does what
// the background upkeep of that process would. A flag given on the
// command line wins over the config.
type upkeepConfig struct {
	path string
}

func (u *upkeepConfig) register(c *cobra.Command, what string) {
	c.Flags().StringVar(&u.path, "config", "", "take "+what+", lake root, catalog and S3 bucket from this 'sluice run' config (flags given win)")
}

// load reads and validates the config and points lf at its lake root
// (unless --lake was given) and catalog (unless --catalog was given). It
// returns nil without --config, and an error already printed for a
// config that does not load or validate.
func (u *upkeepConfig) load(c *cobra.Command, lf *lakeFlags) (*config.Config, error) {
	if u.path == "" {
		return nil, nil
	}
	cfg, err := config.Load(u.path)
	if err != nil {
		return nil, printProblems(c.ErrOrStderr(), u.path, err)
	}
	if c.Flags().Changed("lake") {
		cfg.Lake.Root = lf.root
	}
	if err := cfg.Validate(); err != nil {
		return nil, printProblems(c.ErrOrStderr(), u.path, err)
	}
	lf.root = cfg.Lake.Root
	if !c.Flags().Changed("catalog") {
		lf.catalog = cfg.CatalogDSN()
	}
	return &cfg, nil
}

// unlessSet runs set when the named flag was not given on the command
// line: the config's value replaces the flag's default only.
func unlessSet(c *cobra.Command, flag string, set func()) {
	if !c.Flags().Changed(flag) {
		set()
	}
}

// upkeepStore is the store the lake files are in: the S3 flags' bucket,
// else the config's (lake.s3 or its root), else the --lake directory.
func upkeepStore(ctx context.Context, s3f *s3Flags, lf *lakeFlags, cfg *config.Config) (lake.Store, error) {
	if cfg != nil {
		return queryStore(ctx, s3f, *cfg)
	}
	st, err := s3f.store(ctx)
	if err != nil || st != nil {
		return st, err
	}
	return lake.NewLocalStore(lf.root), nil
}
