package prom

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// fileIndex is what a query needs to know about one lake file before
// reading samples: its column positions, and for each row group its time
// range and the runs of rows of each metric (rows are sorted by
// metric_name, so a metric is one contiguous run per row group). Files are
// immutable, so an index never goes stale.
type fileIndex struct {
	rollup    bool // a metrics_rollup file
	cols      colMap
	labelCols []labelCol
	ovfCol    int // attr_overflow (overflow.go), -1 when none
	rgs       []rgIndex
	// meta tells, per descriptor, OTLP rows from remote-write rows (scope
	// prw.ScopeName) and the latter's metadata; nil when the file has no
	// scope_name column (every row is then read as OTLP).
	meta map[*metricDesc]*descMeta
}

// descMeta is what a file's rows of one metric descriptor say about its
// Prometheus metadata: whether some rows came from OTLP (metadata derived
// from the OTLP type and unit), and the distinct type, help and unit that
// remote write sent for the others (prometheus.type and prometheus.unit in
// metric_metadata, help in description). An entry with bare set stands for
// remote-write rows sent without metadata.
type descMeta struct {
	otlp bool
	rw   []rwMeta
}

type rwMeta struct {
	typ, help, unit string
	bare            bool
}

type colMap struct {
	ts, seriesID, value, count, sum, bounds, buckets, quantiles, qvalues, service, namespace, instance int
	// metrics_rollup only (ts is last_timestamp, value is last there).
	winStart, firstTS, points, min, max, first, increase, resets int
}

type labelCol struct {
	col   int
	key   string // attribute key
	label string // Prometheus label name of OTLP rows ("": none); remote-write rows use key
	kind  byte   // 's' string, 'i' int, 'd' double, 'b' bool
}

type rgIndex struct {
	rows       int64
	minT, maxT int64 // unix ns; minT > maxT when the row group has no timestamps
	runs       []run
}

type run struct {
	start, end int64 // rows of the row group
	desc       *metricDesc
}

// buildIndex reads the metric descriptor columns of every row group once.
func buildIndex(pf *parquet.File) (*fileIndex, error) {
	idx := &fileIndex{ovfCol: -1}
	c := &idx.cols
	*c = colMap{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}
	var nameC, typeC, unitC, tempC, monoC = -1, -1, -1, -1, -1
	var scopeC, helpC, metaC = -1, -1, -1
	// A metrics_rollup file: rg.minT/maxT are its windows' last timestamps.
	tsName, valueName := format.ColTimestamp, format.ColValue
	if t, _ := pf.Lookup(format.MetaTable); t == rollupTable {
		tsName, valueName = format.ColLastTimestamp, format.ColLast
		idx.rollup = true
	}
	for i, p := range pf.Schema().Columns() {
		switch p[0] {
		case tsName:
			c.ts = i
		case format.ColSeriesID:
			c.seriesID = i
		case valueName:
			c.value = i
		case format.ColCount:
			c.count = i
		case format.ColSum:
			c.sum = i
		case format.ColExplicitBounds:
			c.bounds = i
		case format.ColBucketCounts:
			c.buckets = i
		case format.ColQuantiles:
			c.quantiles = i
		case format.ColQuantileValues:
			c.qvalues = i
		case format.ColServiceName:
			c.service = i
		case colNamespace:
			c.namespace = i
		case colInstance:
			c.instance = i
		case format.ColWindowStart:
			c.winStart = i
		case format.ColFirstTimestamp:
			c.firstTS = i
		case format.ColPoints:
			c.points = i
		case format.ColMin:
			c.min = i
		case format.ColMax:
			c.max = i
		case format.ColFirst:
			c.first = i
		case format.ColIncrease:
			c.increase = i
		case format.ColResets:
			c.resets = i
		case format.ColMetricName:
			nameC = i
		case format.ColMetricType:
			typeC = i
		case format.ColUnit:
			unitC = i
		case format.ColTemporality:
			tempC = i
		case format.ColIsMonotonic:
			monoC = i
		case format.ColScopeName:
			scopeC = i
		case format.ColDescription:
			helpC = i
		case format.ColMetricMetadata:
			metaC = i
		default:
			if len(p) == 1 {
				if lc, ok := parseAttrColumn(p[0]); ok {
					lc.col = i
					idx.labelCols = append(idx.labelCols, lc)
				}
			}
			if len(p) == 1 && isPointOverflow(p[0]) {
				idx.ovfCol = i
			}
		}
	}
	if nameC < 0 || typeC < 0 || c.ts < 0 || c.seriesID < 0 || c.value < 0 {
		return nil, errors.New("not a metrics file: missing metric_name, metric_type, timestamp, series_id or value")
	}
	type descKey struct {
		name, unit, mtype, temp string
		mono, rw                bool
	}
	descs := map[descKey]*metricDesc{}
	meta := pf.Metadata()
	for g, rg := range pf.RowGroups() {
		ri := rgIndex{rows: rg.NumRows(), minT: 1, maxT: 0}
		// A rollup window's points run from first_timestamp to
		// last_timestamp: a row group spans the least of the one to the
		// greatest of the other.
		minC := c.ts
		if idx.rollup {
			minC = c.firstTS
		}
		if g < len(meta.RowGroups) && c.ts < len(meta.RowGroups[g].Columns) && minC >= 0 && minC < len(meta.RowGroups[g].Columns) {
			lo := meta.RowGroups[g].Columns[minC].MetaData.Statistics
			hi := meta.RowGroups[g].Columns[c.ts].MetaData.Statistics
			if len(lo.MinValue) == 8 && len(hi.MaxValue) == 8 {
				ri.minT = int64(binary.LittleEndian.Uint64(lo.MinValue))
				ri.maxT = int64(binary.LittleEndian.Uint64(hi.MaxValue))
			}
		}
		n := ri.rows
		var codes [5][]int32
		var strs [5][]string
		for k, col := range [5]int{nameC, typeC, unitC, tempC, monoC} {
			if col < 0 {
				continue
			}
			var err error
			if codes[k], strs[k], err = format.ReadCodes(rg.ColumnChunks()[col], n); err != nil {
				return nil, fmt.Errorf("row group %d: column %s: %w", g, pf.Schema().Columns()[col][0], err)
			}
		}
		// Remote-write rows keep their names verbatim and their histogram
		// rows are native histograms; OTLP rows are mapped: they get
		// descriptors of their own (metricDesc.rw).
		var scopes []int32
		rwScope := int32(-1)
		if scopeC >= 0 {
			var sstrs []string
			var err error
			if scopes, sstrs, err = format.ReadCodes(rg.ColumnChunks()[scopeC], n); err != nil {
				return nil, fmt.Errorf("row group %d: column %s: %w", g, pf.Schema().Columns()[scopeC][0], err)
			}
			rwScope = int32(slices.Index(sstrs, prw.ScopeName))
		}
		rwRow := func(i int64) bool {
			return rwScope >= 0 && scopes[i] == rwScope
		}
		same := func(i, j int64) bool {
			for k := range codes {
				if codes[k] != nil && codes[k][i] != codes[k][j] {
					return false
				}
			}
			return rwRow(i) == rwRow(j)
		}
		for i := int64(0); i < n; i++ {
			if i > 0 && same(i, i-1) {
				ri.runs[len(ri.runs)-1].end = i + 1
				continue
			}
			k := descKey{strOf(codes[0], strs[0], i), strOf(codes[2], strs[2], i), strOf(codes[1], strs[1], i),
				strOf(codes[3], strs[3], i), strOf(codes[4], strs[4], i) == "true", rwRow(i)}
			p := descs[k]
			if p == nil {
				p = &metricDesc{otlpName: k.name, unit: k.unit, mtype: k.mtype, temporality: k.temp, monotonic: k.mono, rw: k.rw}
				p.describe()
				descs[k] = p
			}
			ri.runs = append(ri.runs, run{start: i, end: i + 1, desc: p})
		}
		if scopeC >= 0 {
			if err := idx.readRemoteWriteMeta(pf, g, rg, ri.runs, scopes, rwScope, helpC, metaC); err != nil {
				return nil, err
			}
		}
		idx.rgs = append(idx.rgs, ri)
	}
	return idx, nil
}

// readRemoteWriteMeta records in idx.meta the metadata of the remote-write
// rows of row group g (none: nothing is read past scope_name). A file
// without metric_metadata (a metrics_rollup file) gives its remote-write
// rows as bare.
// scopes are the row group's scope_name codes, rw the code of
// prw.ScopeName (-1: none).
func (idx *fileIndex) readRemoteWriteMeta(pf *parquet.File, g int, rg parquet.RowGroup, runs []run, scopes []int32, rw int32, helpC, metaC int) error {
	n := rg.NumRows()
	cols := pf.Schema().Columns()
	var err error
	var codes [2][]int32
	var strs [2][]string
	if rw >= 0 {
		for k, col := range [2]int{helpC, metaC} {
			if col < 0 {
				continue
			}
			if codes[k], strs[k], err = format.ReadCodes(rg.ColumnChunks()[col], n); err != nil {
				return fmt.Errorf("row group %d: column %s: %w", g, cols[col][0], err)
			}
		}
	}
	if idx.meta == nil {
		idx.meta = map[*metricDesc]*descMeta{}
	}
	type key struct {
		d          *metricDesc
		help, meta string
	}
	seen := map[key]bool{}
	for _, r := range runs {
		dm := idx.meta[r.desc]
		if dm == nil {
			dm = &descMeta{}
			idx.meta[r.desc] = dm
		}
		for i := r.start; i < r.end; i++ {
			if rw < 0 || scopes[i] != rw {
				dm.otlp = true
				continue
			}
			k := key{r.desc, strOf(codes[0], strs[0], i), strOf(codes[1], strs[1], i)}
			if seen[k] {
				continue
			}
			seen[k] = true
			m := parseRemoteWriteMeta(k.help, k.meta, metaC >= 0)
			if !slices.Contains(dm.rw, m) {
				dm.rw = append(dm.rw, m)
			}
		}
	}
	return nil
}

// parseRemoteWriteMeta reads prometheus.type and prometheus.unit from a
// metric_metadata value (an OTLP JSON KeyValue array); bare when the row
// has no type (sent without metadata, or the file does not keep it), or
// type unknown and nothing else (2.0's empty Metadata).
func parseRemoteWriteMeta(help, meta string, kept bool) rwMeta {
	var kvs []struct {
		Key   string `json:"key"`
		Value struct {
			StringValue string `json:"stringValue"`
		} `json:"value"`
	}
	m := rwMeta{help: help}
	if kept && meta != "" && json.Unmarshal([]byte(meta), &kvs) == nil {
		for _, kv := range kvs {
			switch kv.Key {
			case prw.AttrType:
				m.typ = kv.Value.StringValue
			case prw.AttrUnit:
				m.unit = kv.Value.StringValue
			}
		}
	}
	// A 2.0 series carries a Metadata message even when its sender has
	// none to give (the field is not optional in most encoders): an
	// unspecified type without help or unit says nothing, as no metadata.
	if m.typ == "" || m.typ == "unknown" && m.help == "" && m.unit == "" {
		return rwMeta{bare: true}
	}
	return m
}

func strOf(codes []int32, strs []string, i int64) string {
	if codes == nil || codes[i] < 0 {
		return ""
	}
	return strs[codes[i]]
}

// The resource attribute columns of the job and instance labels.
var (
	colNamespace = format.AttrName(format.ScopeResource, "service.namespace", signal.ValueString)
	colInstance  = format.AttrName(format.ScopeResource, "service.instance.id", signal.ValueString)
)

// parseAttrColumn maps a point attribute column (format.ParseAttrName,
// scope attr) to a label column; bytes, array, map and empty values have
// no label.
func parseAttrColumn(name string) (labelCol, bool) {
	c, ok := format.ParseAttrName(name)
	if !ok || c.Scope != format.ScopeRecord {
		return labelCol{}, false
	}
	var kind byte
	switch c.Type {
	case signal.ValueString:
		kind = 's'
	case signal.ValueInt:
		kind = 'i'
	case signal.ValueDouble:
		kind = 'd'
	case signal.ValueBool:
		kind = 'b'
	default:
		return labelCol{}, false
	}
	if c.Key == "" {
		return labelCol{}, false
	}
	// label "" (a key with no OTLP label name): remote-write rows still
	// label with the key itself.
	return labelCol{key: c.Key, label: LabelName(c.Key), kind: kind}, true
}

// indexCache keeps the index of recently used files, by lake path.
type indexCache struct {
	mu    sync.Mutex
	max   int
	m     map[string]*fileIndex
	order []string
}

func newIndexCache(max int) *indexCache {
	return &indexCache{max: max, m: make(map[string]*fileIndex)}
}

func (c *indexCache) get(path string) *fileIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[path]
}

func (c *indexCache) put(path string, idx *fileIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[path]; ok {
		return
	}
	if len(c.order) >= c.max {
		// FIFO: files are immutable and each is indexed once; evicting the
		// oldest costs at most a re-index.
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[path] = idx
	c.order = append(c.order, path)
}
