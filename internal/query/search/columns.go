package search

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/signal"
)

// valueType is the OTLP value type of an attribute column (its suffix).
type valueType uint8

const (
	vtString valueType = iota
	vtInt
	vtDouble
	vtBool
	vtBytes
	vtArray
	vtMap
	vtEmpty
)

// vtOf is the valueType of each attribute value type.
var vtOf = [format.NumValueTypes]valueType{
	signal.ValueEmpty: vtEmpty, signal.ValueString: vtString, signal.ValueBool: vtBool, signal.ValueInt: vtInt,
	signal.ValueDouble: vtDouble, signal.ValueBytes: vtBytes, signal.ValueArray: vtArray, signal.ValueMap: vtMap,
}

// colInfo is the role of one (flat) column of a lake file.
type colInfo struct {
	name   string
	attr   bool
	prefix string // "resource.", "scope." or "attr." for attribute columns
	key    string // the attribute key, unescaped
	vt     valueType
	ovf    bool // an overflow column (overflow.go)
}

// columnInfo is the role of column name: an attribute column (its name
// parsed by format.ParseAttrName, docs/schema.md "Attribute columns"), an
// overflow column or another.
func columnInfo(name string) colInfo {
	ci := colInfo{name: name, ovf: format.IsOverflowColumn(name)}
	if c, ok := format.ParseAttrName(name); ok {
		ci.attr, ci.prefix, ci.key, ci.vt = true, c.Scope.Prefix(), c.Key, vtOf[c.Type]
	}
	return ci
}

// lakeFile is an open lake file with its columns by name.
type lakeFile struct {
	path   string
	table  string
	tenant string
	entry  *cacheEntry
	r      lake.ObjectReader
	pf     *parquet.File
	cols   []colInfo
	index  map[string]int
}

// openLakeFile opens p (indexes and bloom filters are read lazily) and checks that it holds table for tenant, so that
// a wrong catalog row can never leak another tenant's rows.
func openLakeFile(store lake.Store, p, table, tenant string) (lf *lakeFile, err error) {
	r, err := lake.OpenSegment(store, p)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", p, err)
	}
	defer func() {
		if err != nil {
			_ = r.Close()
		}
	}()
	pf, err := format.Open(r, r.Size(), p, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, err
	}
	if t, _ := pf.Lookup(format.MetaTable); t != table {
		return nil, fmt.Errorf("open %q: holds table %q, want %q", p, t, table)
	}
	if t, _ := pf.Lookup(format.MetaTenant); t != tenant {
		return nil, fmt.Errorf("open %q: holds tenant %q, want %q", p, t, tenant)
	}
	lf = &lakeFile{path: p, table: table, tenant: tenant, r: r, pf: pf, index: map[string]int{}}
	for i, path := range pf.Schema().Columns() {
		name := strings.Join(path, ".")
		ci := colInfo{name: name} // nested: never read here
		if len(path) == 1 {
			ci = columnInfo(name)
		}
		lf.cols = append(lf.cols, ci)
		lf.index[name] = i
	}
	return lf, nil
}

func (lf *lakeFile) close() { _ = lf.r.Close() }

func (lf *lakeFile) col(name string) int {
	if i, ok := lf.index[name]; ok {
		return i
	}
	return -1
}

func (lf *lakeFile) stats(g, col int) (*pqformat.Statistics, int64) {
	md := &lf.pf.Metadata().RowGroups[g].Columns[col].MetaData
	return &md.Statistics, md.TotalCompressedSize
}

// int64Stats returns the min and max of an INT64 column chunk; ok is false
// when they are unknown or the chunk has nulls.
func (lf *lakeFile) int64Stats(g, col int) (lo, hi int64, ok bool) {
	s, _ := lf.stats(g, col)
	if s.NullCount != 0 || len(s.MinValue) != 8 || len(s.MaxValue) != 8 {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(s.MinValue)), int64(binary.LittleEndian.Uint64(s.MaxValue)), true
}

var errStop = errors.New("stop")

// eachValue is format.EachValue.
func eachValue(cc parquet.ColumnChunk, buf []parquet.Value, fn func(off int, vals []parquet.Value) error) error {
	return format.EachValue(cc, buf, fn)
}

// valuesAt is format.ValuesAt.
func valuesAt(cc parquet.ColumnChunk, buf []parquet.Value, rows []int64, fn func(i int, v parquet.Value)) error {
	return format.ValuesAt(cc, buf, rows, fn)
}
