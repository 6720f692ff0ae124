package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/version"
)

// errPartial marks a run that did its work but had failures it already
// reported; Main turns it into exit code 1 without printing it again.
var errPartial = errors.New("completed with errors")

// errConfig marks a config file refused before anything started; its
// problems are already printed. Exit code 2, as for a usage error.
var errConfig = errors.New("config refused")

type usageError struct{ error }

// Main runs the command line and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errPartial):
		return 1
	case errors.Is(err, errConfig):
		return 2
	}
	fmt.Fprintf(stderr, "sluice: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Carry telemetry into an open Parquet lake",
		Long:          "sluice carries OpenTelemetry logs, metrics and traces into a Parquet lake that any engine can read.",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	root.AddCommand(
		newCompactCmd(),
		newIngestCmd(),
		newLakeCmd(),
		newParquetCmd(),
		newQueryServerCmd(),
		newRetentionCmd(),
		newRollupCmd(),
		newRunCmd(),
		newSQLCmd(),
		newTopCmd(),
		newTraceCmd(),
		newValidateCmd(),
		newVersionCmd(),
	)
	root.SetVersionTemplate("sluice {{.Version}}\n")
	return root
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d (see '%s --help')", c.CommandPath(), n, len(args), c.CommandPath())}
		}
		return nil
	}
}

func minArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError{fmt.Errorf("%s needs at least %d argument(s) (see '%s --help')", c.CommandPath(), n, c.CommandPath())}
		}
		return nil
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print sluice's version (the one in Parquet footers) and the Prometheus API version it serves",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(c.OutOrStdout(), "sluice %s\nprometheus api %s\n", version.String(), version.Prometheus)
			return nil
		},
	}
}
