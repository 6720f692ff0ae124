package sqlq

import (
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// Tables are the views every session has, in this order.
var Tables = []string{TableLogs, TableMetrics, TableRollup, TableTraces, TableIOEvents}

// View (and catalog table) names: the lake's tables.
const (
	TableLogs    = format.TableLogs
	TableMetrics = format.TableMetrics
	TableRollup  = format.TableRollup
	TableTraces  = format.TableTraces
	// TableIOEvents holds traced I/O syscalls (sluice trace --record).
	TableIOEvents = format.TableIOEvents
)

// hiveTypes fixes the partition columns' types: DuckDB's auto-detection
// otherwise guesses per table (hour=08 came out VARCHAR for one table and
// BIGINT for another).
const hiveTypes = `{'tenant': VARCHAR, 'dt': DATE, 'hour': INTEGER}`

// column is a fixed column as DuckDB 1.5 reads it from sluice's Parquet
// (docs/schema.md): what an empty view carries so that queries over a table
// without files still bind. Attribute columns are per file and not listed.
type column struct{ name, typ string }

var partitionColumns = []column{
	{"tenant", "VARCHAR"},
	{"dt", "DATE"},
	{"hour", "INTEGER"},
}

// fixedColumns are each table's fixed columns (format's descriptors; for
// logs, metrics and traces they include the resource and scope columns).
var fixedColumns = func() map[string][]column {
	m := map[string][]column{}
	for _, t := range format.Tables {
		cols := make([]column, len(t.Columns))
		for i, c := range t.Columns {
			cols[i] = column{c.Name, duckType(c.Kind)}
		}
		m[t.Name] = cols
	}
	return m
}()

// duckType is the DuckDB type DuckDB gives a Parquet column of kind k.
func duckType(k format.Kind) string {
	switch k {
	case format.KindTime, format.KindTimeReq:
		return "TIMESTAMPTZ"
	case format.KindInt32, format.KindOptInt32:
		return "INTEGER"
	case format.KindInt64, format.KindOptInt64:
		return "BIGINT"
	case format.KindUint32:
		return "UINTEGER"
	case format.KindUint64, format.KindOptUint64:
		return "UBIGINT"
	case format.KindBool, format.KindOptBool:
		return "BOOLEAN"
	case format.KindOptDouble:
		return "DOUBLE"
	case format.KindOptBytes:
		return "BLOB"
	case format.KindListU64, format.KindOptListU64:
		return "UBIGINT[]"
	case format.KindListF64, format.KindOptListF64:
		return "DOUBLE[]"
	}
	return "VARCHAR" // dictionary and plain strings
}

// viewSQL is the CREATE VIEW statement of table over files (absolute
// paths); with no files, a typed view over zero rows.
func viewSQL(table string, files []string) string {
	var b strings.Builder
	b.WriteString("CREATE VIEW ")
	b.WriteString(quoteIdent(table))
	b.WriteString(" AS ")
	if len(files) == 0 {
		b.WriteString("SELECT * FROM (SELECT ")
		cols := append(slices.Clone(fixedColumns[table]), partitionColumns...)
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("NULL::")
			b.WriteString(c.typ)
			b.WriteString(" AS ")
			b.WriteString(quoteIdent(c.name))
		}
		b.WriteString(") WHERE false")
		return b.String()
	}
	b.WriteString("SELECT * FROM read_parquet(")
	writeList(&b, files)
	b.WriteString(", union_by_name = true, hive_partitioning = true, hive_types = ")
	b.WriteString(hiveTypes)
	b.WriteString(")")
	return b.String()
}

func writeList(b *strings.Builder, items []string) {
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteString(s))
	}
	b.WriteByte(']')
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
