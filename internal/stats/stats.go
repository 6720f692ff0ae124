package stats

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/promname"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Config bounds the statistics (the stats section of the YAML config).
type Config struct {
	// Window is the activity window (see the package doc).
	Window time.Duration
	// MaxSeries bounds the active series tracked (in a table of at most
	// twice that many 12-byte slots).
	MaxSeries int
	// MaxMetrics bounds the (tenant, metric name) entries.
	MaxMetrics int
	// MaxLabelPairs bounds the (tenant, label, value) entries.
	MaxLabelPairs int
}

// Defaults of Config; the YAML defaults (internal/config) are the same.
const (
	DefaultWindow        = 5 * time.Minute
	DefaultMaxSeries     = 1_000_000
	DefaultMaxMetrics    = 10_000
	DefaultMaxLabelPairs = 100_000
)

// maxStoredValue bounds the bytes of a label value kept for display; the
// value's hash and length are of the whole value.
const maxStoredValue = 256

func (c *Config) fill() error {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.MaxSeries == 0 {
		c.MaxSeries = DefaultMaxSeries
	}
	if c.MaxMetrics == 0 {
		c.MaxMetrics = DefaultMaxMetrics
	}
	if c.MaxLabelPairs == 0 {
		c.MaxLabelPairs = DefaultMaxLabelPairs
	}
	switch {
	case c.Window < time.Second:
		return fmt.Errorf("stats: window %v is shorter than 1s", c.Window)
	case c.MaxSeries < 1 || c.MaxMetrics < 1 || c.MaxLabelPairs < 1:
		return fmt.Errorf("stats: max_series, max_metrics and max_label_pairs must be at least 1")
	case c.MaxSeries > 1<<30:
		return fmt.Errorf("stats: max_series %d is more than %d", c.MaxSeries, 1<<30)
	}
	return nil
}

// kind is how a metric type expands into Prometheus series.
type kind uint8

const (
	kindNone      kind = iota // not exposed to PromQL (unknown type or no name)
	kindValue                 // gauge or sum: one series
	kindHistogram             // _bucket{le} per bucket, _sum, _count
	kindExpHist               // _sum, _count
	kindSummary               // {quantile} per quantile, _sum, _count
)

// metric is one (tenant, Prometheus metric name).
type metric struct {
	tenant   *tenantStats
	name     string
	series   [2]int64 // active series per window generation
	samples  [2]int64 // per window generation
	bytes    [2]float64
	total    uint64 // samples since start-up
	totBytes float64
	before   uint64 // samples since start-up before the rules (ObserveBeforeRules)
}

// pair is one (tenant, label name, label value).
type pair struct {
	tenant      *tenantStats
	name, value string // value truncated to maxStoredValue
	valueLen    int
	cnt         [2]int64 // active series with the pair, per generation
}

type tenantStats struct {
	name       string
	hash       uint64
	minT, maxT [2]int64 // point times (ms) per generation; minT > maxT: none
	samples    [2]int64
	bytes      [2]float64
	total      uint64
	totBytes   float64
}

// descInfo is a metric descriptor of one tenant resolved to its Prometheus
// names.
type descInfo struct {
	kind   kind
	fold   uint64     // folded into the series key: tenant, unit, type
	outs   [3]*metric // value/_bucket/quantile, _sum, _count (nil: not tracked)
	names  [3]string
	nout   int
	tenant *tenantStats
	base   string // the metric family: the name before _bucket, _sum, _count
	famH   uint64 // hash of tenant and base
	// rw: sent by remote write (scope prw.ScopeName): the metric and its
	// labels keep exactly their names, as the query API shows them.
	rw bool
}

// rwFold is folded into the descriptor key (and so the series key) of
// remote-write metrics: they are named apart from OTLP metrics of the same
// stored name, unit and type, and their series apart from OTLP series of
// the same id (the series id does not hold the scope).
const rwFold = 0x2545F4914F6CDD1D

// remoteWrite reports whether every point of b was sent by remote write
// (the decoder's batches: one scope, prw.ScopeName).
func remoteWrite(b *signal.Metrics) bool {
	if len(b.Scopes) == 0 {
		return false
	}
	for i := range b.Scopes {
		if b.String(b.Scopes[i].Name) != prw.ScopeName {
			return false
		}
	}
	return true
}

// familyLabel is one label of one metric family (tenant, base name); its
// distinct values are the familyPairs with active series.
type familyLabel struct {
	tenant       *tenantStats
	family, name string
}

// familyPair is one value of a familyLabel: only its active series per
// generation, no string.
type familyPair struct {
	fl  *familyLabel
	cnt [2]int64
}

// The series table is open addressing with linear probing over one array
// of words, 8 bytes a series, so that the per-sample lookup touches one
// word of a table half the size a 16-byte slot made it (the relay's 30,000
// series took 1 MiB, more than this machine's L2 share next to the
// requests it scans: a cache miss per sample). A word is a series' key
// (the 64-bit hash, see seriesKey) in its upper 48 bits and the low 16
// bits of the window it was last seen in; 0 is empty. A series' home slot
// comes from its stored key bits, so a rehash needs no other copy of the
// key. Windows compare by their low 16 bits only: at a roll-over every
// series older than the previous window is swept (roll), so the words
// hold at most two windows, the current one and the one before, which
// differ in those bits. The bucket or quantile count of a series' first
// point in its window is in nbs (same index), read only when the series
// moves to a new window.
const (
	epochBits = 16
	epochMask = 1<<epochBits - 1
)

// seriesKey is the table key of a series hash: its upper 48 bits, never
// zero (bit 16 set).
func seriesKey(h uint64) uint64 { return h&^epochMask | 1<<epochBits }

// Stats is the statistics of one process. Safe for concurrent use.
type Stats struct {
	cfg   Config
	now   func() time.Time
	start int64 // unix ns

	mu      sync.Mutex
	epoch   int64
	slots   []uint64 // seriesKey | window (low 16 bits); 0 empty
	nbs     []uint32 // per slot: buckets or quantiles of its first point in the window
	used    int      // slots holding a series
	metrics map[uint64]*metric
	pairs   map[uint64]*pair
	flabels map[uint64]*familyLabel
	fpairs  map[uint64]*familyPair
	tenants map[string]*tenantStats
	descs   map[uint64]*descInfo

	overSeries, overMetrics, overPairs uint64

	// per-call scratch (under mu)
	bd   []*descInfo
	ds   [][3]int64 // samples per batch descriptor and output
	kv   []promname.AttrLabel
	sb   labels.ScratchBuilder
	ls   labels.Labels
	num  []byte
	lbls []lbl
	sl   []Label
	// ObserveSeries's label names (series.go), under mu.
	labelKeys map[string]string
	// rwKey's scratch and its last point's key (series.go), under mu.
	ord     []uint32
	fields  []byte
	lastKey rwLast
	rwKeys  []rwKeySlot
}

type lbl struct {
	name, value string
	h           uint64 // hash of name and value (without tenant)
}

// New returns empty statistics; zero fields of cfg take the defaults.
func New(cfg Config) (*Stats, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return newWithClock(cfg, time.Now), nil
}

func newWithClock(cfg Config, now func() time.Time) *Stats {
	t := now().UnixNano()
	return &Stats{
		cfg: cfg, now: now, start: t, epoch: t / int64(cfg.Window),
		slots:   make([]uint64, 1024),
		nbs:     make([]uint32, 1024),
		metrics: map[uint64]*metric{},
		pairs:   map[uint64]*pair{},
		flabels: map[uint64]*familyLabel{},
		fpairs:  map[uint64]*familyPair{},
		tenants: map[string]*tenantStats{},
		descs:   map[uint64]*descInfo{},
	}
}

// Config returns the resolved configuration.
func (s *Stats) Config() Config { return s.cfg }

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// Observe counts a metrics batch of tenant that the queue accepted;
// recordBytes is the size of its queue record. b.SeriesID must be set.
func (s *Stats) Observe(tenant string, b *signal.Metrics, recordBytes int) {
	n := b.Len()
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	s.roll(now / int64(s.cfg.Window))
	g := int(s.epoch & 1)
	ep := uint64(s.epoch) & epochMask
	t := s.tenant(tenant)
	s.resolve(t, b)
	s.lastKey = rwLast{}

	minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
	var total int64
	for i := 0; i < n; i++ {
		di := b.Desc[i]
		d := s.bd[di]
		if d.kind == kindNone {
			continue
		}
		ts := b.Time[i]
		minT, maxT = min(minT, ts), max(maxT, ts)
		nb, k := s.countSamples(b, i, d.kind, &s.ds[di])
		total += k
		id := b.SeriesID[i]
		if d.rw {
			id = s.rwKey(b, i, id)
		}
		key := seriesKey(mix(id ^ d.fold))
		p, w := s.find(key)
		if w != 0 {
			if w&epochMask == ep {
				continue
			}
			// Seen in the previous window (older ones were swept at the
			// roll-over): move it to this one.
			s.labelsOf(b, i, d)
			s.account(b, i, d, 1-g, s.nbs[p], -1)
			s.account(b, i, d, g, nb, 1)
			s.slots[p], s.nbs[p] = key|ep, nb
			continue
		}
		if s.used >= s.cfg.MaxSeries {
			s.overSeries++
			continue
		}
		p = s.insert(p, key)
		s.slots[p], s.nbs[p] = key|ep, nb
		s.labelsOf(b, i, d)
		s.account(b, i, d, g, nb, 1)
	}
	s.finishObserve(t, g, minT, maxT, total, recordBytes)
}

// finishObserve adds a batch's times, samples and bytes (total samples of
// which s.ds holds the share per descriptor and output) to its tenant and
// metrics, and clears s.ds.
func (s *Stats) finishObserve(t *tenantStats, g int, minT, maxT, total int64, recordBytes int) {
	if total == 0 {
		return
	}
	if minT <= maxT {
		if t.minT[g] > t.maxT[g] {
			t.minT[g], t.maxT[g] = minT, maxT
		} else {
			t.minT[g], t.maxT[g] = min(t.minT[g], minT), max(t.maxT[g], maxT)
		}
	}
	perSample := float64(recordBytes) / float64(total)
	t.samples[g] += total
	t.total += uint64(total)
	t.bytes[g] += float64(recordBytes)
	t.totBytes += float64(recordBytes)
	for di := range s.ds {
		c := &s.ds[di]
		d := s.bd[di]
		for o := 0; o < d.nout; o++ {
			if c[o] == 0 || d.outs[o] == nil {
				continue
			}
			m := d.outs[o]
			by := float64(c[o]) * perSample
			m.samples[g] += c[o]
			m.total += uint64(c[o])
			m.bytes[g] += by
			m.totBytes += by
		}
		*c = [3]int64{}
	}
}

// countSamples adds the samples of point i (of a descriptor of kind k) to
// c, per output, and returns its buckets or quantiles and its samples.
func (s *Stats) countSamples(b *signal.Metrics, i int, k kind, c *[3]int64) (nb uint32, n int64) {
	switch k {
	case kindValue:
		c[0]++
		return 0, 1
	case kindHistogram:
		nb = histBuckets(b, i)
	case kindSummary:
		nb = uint32(b.Quantiles[i].End-b.Quantiles[i].Start) / 2
	}
	c[0] += int64(nb)
	c[1]++
	c[2]++
	return nb, int64(nb) + 2
}

// ObserveBeforeRules counts the samples of a metrics batch of tenant
// before the processing rules run on it (the consumer calls it only while
// rules are loaded), so that a metric's samples before the rules and
// stored can be compared.
func (s *Stats) ObserveBeforeRules(tenant string, b *signal.Metrics) {
	if b.Len() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(s.now().UnixNano() / int64(s.cfg.Window))
	s.resolve(s.tenant(tenant), b)
	for i, di := range b.Desc {
		if d := s.bd[di]; d.kind != kindNone {
			s.countSamples(b, i, d.kind, &s.ds[di])
		}
	}
	for di := range s.ds {
		c := &s.ds[di]
		d := s.bd[di]
		for o := 0; o < d.nout; o++ {
			if m := d.outs[o]; m != nil {
				m.before += uint64(c[o])
			}
		}
		*c = [3]int64{}
	}
}

// histBuckets is the number of _bucket series of histogram point i: none
// when its counts do not fit its bounds, as the query adapter shows it.
func histBuckets(b *signal.Metrics, i int) uint32 {
	nc := b.BucketCounts[i].End - b.BucketCounts[i].Start
	if nc == 0 || nc != b.Bounds[i].End-b.Bounds[i].Start+1 {
		return 0
	}
	return nc
}

func (s *Stats) tenant(name string) *tenantStats {
	t := s.tenants[name]
	if t == nil {
		t = &tenantStats{name: name, hash: xxhash.Sum64String(name)}
		t.minT, t.maxT = [2]int64{math.MaxInt64, math.MaxInt64}, [2]int64{math.MinInt64, math.MinInt64}
		s.tenants[name] = t
	}
	return t
}

// resolve fills s.bd with the descriptors of b for tenant t.
func (s *Stats) resolve(t *tenantStats, b *signal.Metrics) {
	rw := remoteWrite(b)
	s.bd = s.bd[:0]
	if cap(s.ds) < len(b.Descs) {
		s.ds = make([][3]int64, len(b.Descs))
	}
	s.ds = s.ds[:len(b.Descs)]
	for i := range b.Descs {
		d := &b.Descs[i]
		fold := typeFold(xxhash.Sum64(b.Bytes(d.Unit)), d.Type, d.Temporality, d.Monotonic)
		if rw {
			fold ^= rwFold
		}
		h := descHash(t, xxhash.Sum64(b.Bytes(d.Name)), fold)
		di := s.descs[h]
		if di == nil {
			di = s.describeName(t, b.String(d.Name), b.String(d.Unit), d.Type, d.Monotonic, rw, h)
			s.descs[h] = di
		}
		s.bd = append(s.bd, di)
	}
}

// descHash is the key of a descriptor of tenant t in s.descs, from the
// hash of its name and typeFold.
func descHash(t *tenantStats, nameHash, fold uint64) uint64 {
	return mix(nameHash*0x9E3779B97F4A7C15 ^ fold ^ t.hash)
}

// typeFold hashes a descriptor's unit (its xxhash), type and temporality.
func typeFold(unitHash uint64, typ signal.MetricType, temp signal.Temporality, monotonic bool) uint64 {
	h := mix(unitHash + uint64(typ)<<8 + uint64(temp)<<1)
	if monotonic {
		h ^= 0x5bd1e995
	}
	return h
}

// describeName resolves a descriptor (name, unit, type; key h) of tenant
// t; rw: sent by remote write, named exactly as stored. name and unit may
// alias a batch or request: nothing keeps them.
func (s *Stats) describeName(t *tenantStats, name, unit string, typ signal.MetricType, monotonic, rw bool, h uint64) *descInfo {
	di := &descInfo{tenant: t, fold: h, rw: rw}
	var tt otlptranslator.MetricType
	switch typ {
	case signal.MetricGauge:
		di.kind, tt = kindValue, otlptranslator.MetricTypeGauge
	case signal.MetricSum:
		di.kind, tt = kindValue, otlptranslator.MetricTypeNonMonotonicCounter
		if monotonic {
			tt = otlptranslator.MetricTypeMonotonicCounter
		}
	case signal.MetricHistogram:
		di.kind, tt = kindHistogram, otlptranslator.MetricTypeHistogram
	case signal.MetricExponentialHistogram:
		di.kind, tt = kindExpHist, otlptranslator.MetricTypeExponentialHistogram
	case signal.MetricSummary:
		di.kind, tt = kindSummary, otlptranslator.MetricTypeSummary
	default:
		return di
	}
	base := name
	if !rw {
		base = promname.Base(name, unit, tt)
	}
	if base == "" {
		di.kind = kindNone
		return di
	}
	base = strings.Clone(base) // it may be the name itself, in the batch's arena
	di.base, di.famH = base, mix(t.hash^xxhash.Sum64String(base)*0x9E3779B97F4A7C15)
	switch di.kind {
	case kindValue:
		di.names[0], di.nout = base, 1
	case kindHistogram:
		di.names, di.nout = [3]string{base + "_bucket", base + "_sum", base + "_count"}, 3
	case kindExpHist:
		di.names, di.nout = [3]string{"", base + "_sum", base + "_count"}, 3
	case kindSummary:
		di.names, di.nout = [3]string{base, base + "_sum", base + "_count"}, 3
	}
	for o := 0; o < di.nout; o++ {
		if di.names[o] != "" {
			di.outs[o] = s.metric(t, di.names[o])
		}
	}
	return di
}

func (s *Stats) metric(t *tenantStats, name string) *metric {
	k := mix(t.hash ^ xxhash.Sum64String(name))
	if m := s.metrics[k]; m != nil {
		return m
	}
	if len(s.metrics) >= s.cfg.MaxMetrics {
		s.overMetrics++
		return nil
	}
	m := &metric{tenant: t, name: name}
	s.metrics[k] = m
	return m
}

// labelsOf puts the labels of series i, other than __name__, le and
// quantile, into s.lbls: the resource's service_name, job and instance and
// the point attributes, as the query adapter and the processor name them.
func (s *Stats) labelsOf(b *signal.Metrics, i int, d *descInfo) {
	c := &b.Common
	s.sb.Reset()
	res := b.Resources[b.Resource[i]].Attrs
	svc := attrStr(c, res, "service.name")
	if svc != "" {
		s.sb.Add(promname.LabelServiceName, svc)
		j := svc
		if ns := attrStr(c, res, "service.namespace"); ns != "" {
			j = ns + "/" + svc
		}
		s.sb.Add(promname.LabelJob, j)
	}
	inst := attrStr(c, res, "service.instance.id")
	if inst != "" {
		s.sb.Add(promname.LabelInstance, inst)
	}
	s.kv = s.kv[:0]
	r := b.Attr[i]
	for a := r.Start; a < r.End; a++ {
		key := c.Keys.Name(c.Attrs.Key[a])
		l := key
		if !d.rw {
			l = promname.Reclaim(key, promname.LabelName(key), svc != "", inst != "", d.kind == kindHistogram, d.kind == kindSummary)
		}
		if l == "" {
			continue
		}
		s.kv = append(s.kv, promname.AttrLabel{Label: l, Key: key, Value: promname.AttrValue(c, int(a))})
	}
	s.finishLabels()
}

func pairHash(name, value string) uint64 {
	return mix(xxhash.Sum64String(name)*0x9E3779B97F4A7C15 ^ xxhash.Sum64String(value))
}

func pairHashBytes(name string, value []byte) uint64 {
	return mix(xxhash.Sum64String(name)*0x9E3779B97F4A7C15 ^ xxhash.Sum64(value))
}

// account adds delta times series i's Prometheus series (with nb buckets
// or quantiles) to generation g of its metrics and label pairs; s.lbls
// holds its labels.
func (s *Stats) account(b *signal.Metrics, i int, d *descInfo, g int, nb uint32, delta int64) {
	var per [3]int64
	switch d.kind {
	case kindValue:
		per[0] = 1
	case kindHistogram, kindSummary:
		per = [3]int64{int64(nb), 1, 1}
	case kindExpHist:
		per = [3]int64{0, 1, 1}
	}
	all := per[0] + per[1] + per[2]
	t := d.tenant
	for o := 0; o < d.nout; o++ {
		if per[o] == 0 {
			continue
		}
		if m := d.outs[o]; m != nil {
			// Never below 0: an entry created after an overflow may see a
			// series leave that it never saw arrive.
			m.series[g] = max(m.series[g]+delta*per[o], 0)
		}
		s.addPair(t, labels.MetricName, d.names[o], pairHash(labels.MetricName, d.names[o]), g, delta*per[o])
	}
	for _, l := range s.lbls {
		s.addPair(t, l.name, l.value, l.h, g, delta*all)
		s.addFamilyPair(d, l.name, l.h, g, delta)
	}
	switch {
	case d.kind == kindHistogram && nb > 0:
		bounds := b.F64[b.Bounds[i].Start:b.Bounds[i].End]
		for k := uint32(0); k < nb; k++ {
			le := math.Inf(1)
			if int(k) < len(bounds) {
				le = bounds[k]
			}
			s.addNumPair(t, promname.LabelLe, le, g, delta)
		}
	case d.kind == kindSummary && nb > 0:
		q := b.F64[b.Quantiles[i].Start:b.Quantiles[i].End]
		for k := 0; k+1 < len(q) && k/2 < int(nb); k += 2 {
			s.addNumPair(t, promname.LabelQuantile, q[k], g, delta)
		}
	}
}

// addFamilyPair counts an OTLP series of d's metric family with label
// pair h (hash of name and value) in generation g.
func (s *Stats) addFamilyPair(d *descInfo, name string, h uint64, g int, delta int64) {
	k := mix(h ^ d.famH)
	p := s.fpairs[k]
	if p == nil {
		if delta < 0 {
			return
		}
		if len(s.fpairs) >= s.cfg.MaxLabelPairs {
			s.overPairs++
			return
		}
		lk := mix(d.famH ^ xxhash.Sum64String(name))
		fl := s.flabels[lk]
		if fl == nil {
			fl = &familyLabel{tenant: d.tenant, family: d.base, name: strings.Clone(name)}
			s.flabels[lk] = fl
		}
		p = &familyPair{fl: fl}
		s.fpairs[k] = p
	}
	p.cnt[g] = max(p.cnt[g]+delta, 0)
}

// addNumPair counts a le or quantile pair, formatted as Prometheus does.
func (s *Stats) addNumPair(t *tenantStats, name string, v float64, g int, delta int64) {
	switch {
	case math.IsInf(v, 1):
		s.num = append(s.num[:0], "+Inf"...)
	case math.IsInf(v, -1):
		s.num = append(s.num[:0], "-Inf"...)
	default:
		s.num = strconv.AppendFloat(s.num[:0], v, 'f', -1, 64)
	}
	h := pairHashBytes(name, s.num)
	s.addPairKey(t, name, h, g, delta, func() string { return string(s.num) })
}

func (s *Stats) addPair(t *tenantStats, name, value string, h uint64, g int, delta int64) {
	s.addPairKey(t, name, h, g, delta, func() string { return value })
}

func (s *Stats) addPairKey(t *tenantStats, name string, h uint64, g int, delta int64, value func() string) {
	k := mix(h ^ t.hash)
	p := s.pairs[k]
	if p == nil {
		if delta < 0 {
			return // not tracked (an overflow); nothing to take back
		}
		if len(s.pairs) >= s.cfg.MaxLabelPairs {
			s.overPairs++
			return
		}
		v := value()
		// Both may alias s.ls or a batch's arena: copy them.
		p = &pair{tenant: t, name: strings.Clone(name), valueLen: len(v)}
		if len(v) > maxStoredValue {
			v = v[:maxStoredValue]
		}
		p.value = strings.Clone(v)
		s.pairs[k] = p
	}
	p.cnt[g] = max(p.cnt[g]+delta, 0)
}

func attrStr(c *signal.Common, r signal.Range, key string) string {
	if a := c.FindAttr(r, key); a >= 0 {
		return promname.AttrValue(c, a)
	}
	return ""
}

// find returns the slot of key (a seriesKey) and its word, or the empty
// slot where it would go and 0.
func (s *Stats) find(key uint64) (int, uint64) {
	mask := len(s.slots) - 1
	p := int(key>>epochBits) & mask
	for {
		w := s.slots[p]
		if w&^epochMask == key || w == 0 {
			return p, w
		}
		p = (p + 1) & mask
	}
}

// insert reserves the empty slot p (from find) for key, growing the table
// at three quarters full, and returns its slot; the caller sets the word
// and nbs.
func (s *Stats) insert(p int, key uint64) int {
	if (s.used+1)*4 > len(s.slots)*3 {
		s.rehash(len(s.slots)*2, false, 0)
		p, _ = s.find(key)
	}
	s.used++
	return p
}

// rehash rebuilds the table with size slots, keeping every series, or with
// sweep only those last seen in the window whose low 16 bits are keep.
func (s *Stats) rehash(size int, sweep bool, keep uint64) {
	old, oldNB := s.slots, s.nbs
	s.slots, s.nbs = make([]uint64, size), make([]uint32, size)
	s.used = 0
	for i, w := range old {
		if w == 0 || (sweep && w&epochMask != keep) {
			continue
		}
		p, _ := s.find(w &^ epochMask)
		s.slots[p], s.nbs[p] = w, oldNB[i]
		s.used++
	}
}

// roll moves to window e: generations older than the previous window are
// dropped, with the series, metrics and pairs only they held.
func (s *Stats) roll(e int64) {
	if e <= s.epoch {
		return
	}
	var drop []int
	if e-s.epoch >= 2 {
		drop = []int{0, 1}
	} else {
		drop = []int{int(e & 1)}
	}
	for _, g := range drop {
		for _, m := range s.metrics {
			m.series[g], m.samples[g], m.bytes[g] = 0, 0, 0
		}
		for _, p := range s.pairs {
			p.cnt[g] = 0
		}
		for _, t := range s.tenants {
			t.minT[g], t.maxT[g], t.samples[g], t.bytes[g] = math.MaxInt64, math.MinInt64, 0, 0
		}
	}
	for k, m := range s.metrics {
		if m.series == [2]int64{} && m.samples == [2]int64{} && m.before == 0 {
			delete(s.metrics, k)
		}
	}
	for k, p := range s.pairs {
		if p.cnt == [2]int64{} {
			delete(s.pairs, k)
		}
	}
	live := map[*familyLabel]bool{}
	for k, p := range s.fpairs {
		for _, g := range drop {
			p.cnt[g] = 0
		}
		if p.cnt == [2]int64{} {
			delete(s.fpairs, k)
		} else {
			live[p.fl] = true
		}
	}
	for k, fl := range s.flabels {
		if !live[fl] {
			delete(s.flabels, k)
		}
	}
	clear(s.descs) // they point at metrics just deleted
	// The series of window e-1 stay (they are the previous window now);
	// the table held only windows s.epoch-1 and s.epoch, so when s.epoch
	// is e-1 its older half goes, and when e is further on everything goes.
	prev := s.epoch
	s.epoch = e
	keep := uint64(e-1) & epochMask
	n := 0
	if prev == e-1 {
		for _, w := range s.slots {
			if w != 0 && w&epochMask == keep {
				n++
			}
		}
	}
	size := 1024
	for size < n*2 {
		size *= 2
	}
	if n == 0 {
		s.slots, s.nbs, s.used = make([]uint64, size), make([]uint32, size), 0
		return
	}
	s.rehash(size, true, keep)
}
