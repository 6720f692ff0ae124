// Command sluice carries telemetry into an open Parquet lake.
package main

import (
	"os"

	"github.com/sluice-dev/sluice/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
