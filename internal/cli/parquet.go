package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/parquet-go/parquet-go"
	"github.com/spf13/cobra"
)

func newParquetCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "parquet",
		Short: "Look inside Parquet files",
	}
	c.AddCommand(newParquetSchemaCmd(), newParquetCatCmd())
	return c
}

func openParquet(path string) (*parquet.File, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a readable Parquet file: %w", path, err)
	}
	return pf, f, nil
}

func newParquetSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema FILE",
		Short: "Print a Parquet file's schema, row groups and key/value metadata",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			pf, f, err := openParquet(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			out := c.OutOrStdout()
			fmt.Fprintln(out, pf.Schema())
			md := pf.Metadata()
			fmt.Fprintf(out, "\nrows: %d\nrow groups: %d\ncreated by: %s\n", pf.NumRows(), len(pf.RowGroups()), md.CreatedBy)
			for i, rg := range md.RowGroups {
				var compressed int64
				for _, col := range rg.Columns {
					compressed += col.MetaData.TotalCompressedSize
				}
				fmt.Fprintf(out, "  row group %d: %d rows, %s uncompressed, %s compressed\n", i, rg.NumRows,
					humanBytes(rg.TotalByteSize), humanBytes(compressed))
			}
			if len(md.KeyValueMetadata) > 0 {
				fmt.Fprintln(out, "metadata:")
				kvs := md.KeyValueMetadata
				sort.Slice(kvs, func(i, j int) bool { return kvs[i].Key < kvs[j].Key })
				for _, kv := range kvs {
					fmt.Fprintf(out, "  %s = %s\n", kv.Key, kv.Value)
				}
			}
			return nil
		},
	}
}

func newParquetCatCmd() *cobra.Command {
	var (
		limit int
		nulls bool
	)
	c := &cobra.Command{
		Use:   "cat FILE",
		Short: "Print a Parquet file's rows as JSON lines",
		Long: `Print rows as one JSON object per line. Null columns are left out unless
--nulls is given; binary values are base64, as encoding/json writes them.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			pf, f, err := openParquet(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			r := parquet.NewReader(pf)
			defer r.Close()
			enc := json.NewEncoder(c.OutOrStdout())
			enc.SetEscapeHTML(false)
			for n := 0; limit <= 0 || n < limit; n++ {
				row := map[string]any{}
				if err := r.Read(&row); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return fmt.Errorf("%s: row %d: %w", args[0], n, err)
				}
				if !nulls {
					for k, v := range row {
						if v == nil {
							delete(row, k)
						}
					}
				}
				if err := enc.Encode(row); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().IntVarP(&limit, "limit", "n", 20, "rows to print; 0 for all")
	c.Flags().BoolVar(&nulls, "nulls", false, "include null columns")
	return c
}
