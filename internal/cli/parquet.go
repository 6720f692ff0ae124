package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
	"github.com/spf13/cobra"

	lakeformat "github.com/sluice-dev/sluice/internal/lake/format"
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
	pf, err := lakeformat.Open(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("not a readable Parquet file: %w", err)
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
		RunE: func(c *cobra.Command, args []string) (err error) {
			pf, f, err := openParquet(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			defer lakeformat.Recover(&err, "read %q", args[0]) // a damaged page fails the command, not with a panic
			r := parquet.NewReader(pf)
			defer r.Close()
			fields := map[string]parquet.Node{}
			for _, f := range pf.Schema().Fields() {
				fields[f.Name()] = f
			}
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
				for k, v := range row {
					if v == nil && !nulls {
						delete(row, k)
						continue
					}
					if field, ok := fields[k]; ok {
						row[k] = binaryAsBytes(field, v)
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

// binaryAsBytes turns the values of v, read from a column of node, that are
// binary without a string logical type (sketch, ids) from the string
// parquet-go reads them as into []byte, which encoding/json writes as
// base64; written as strings they would be mangled into invalid UTF-8.
func binaryAsBytes(node parquet.Node, v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any: // a repeated field or a LIST
		elem := node
		if isLogical[*format.ListType](node) && len(node.Fields()) == 1 {
			if inner := node.Fields()[0]; !inner.Leaf() && len(inner.Fields()) == 1 {
				elem = inner.Fields()[0]
			}
		}
		for i := range v {
			v[i] = binaryAsBytes(elem, v[i])
		}
		return v
	case map[string]any:
		if isLogical[*format.MapType](node) && len(node.Fields()) == 1 {
			if kv := node.Fields()[0]; len(kv.Fields()) == 2 {
				for k, x := range v {
					v[k] = binaryAsBytes(kv.Fields()[1], x)
				}
			}
			return v
		}
		for _, f := range node.Fields() {
			if x, ok := v[f.Name()]; ok {
				v[f.Name()] = binaryAsBytes(f, x)
			}
		}
		return v
	case string:
		if node.Leaf() && isRawBinary(node) {
			return []byte(v)
		}
	}
	return v
}

// isRawBinary reports a binary leaf whose bytes are not text.
func isRawBinary(node parquet.Node) bool {
	t := node.Type()
	switch t.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
	default:
		return false
	}
	if isLogical[*format.StringType](node) || isLogical[*format.EnumType](node) || isLogical[*format.JsonType](node) {
		return false
	}
	if ct := t.ConvertedType(); ct != nil && (*ct == deprecated.UTF8 || *ct == deprecated.Enum || *ct == deprecated.Json) {
		return false
	}
	return true
}

func isLogical[T format.LogicalTypeValue](node parquet.Node) bool {
	lt := node.Type().LogicalType()
	if lt == nil {
		return false
	}
	_, ok := lt.Value.(T)
	return ok
}
