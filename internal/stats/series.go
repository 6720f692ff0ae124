package stats

import (
	"math"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/promname"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// Label is one label of a Series, aliasing the caller's bytes for the
// duration of the call.
type Label struct{ Name, Value []byte }

// Series is a request's float samples as a receiver that built no batch
// found them (remote write relayed as received, package prw's Scanner
// with LabelKeys): each is a gauge sample with no unit, as the
// remote-write decoder maps it, named Names[Name[i]], of the series whose
// label set has key ID[i] (prw.LabelsKey) at Time[i] (ns). ObserveSeries
// counts it exactly as Observe counts the decoded batch, which keys
// remote-write series by prw.LabelsKey too (rwKey).
type Series struct {
	Names [][]byte
	// NameHash, when not nil, is xxhash.Sum64 of each Names entry, as the
	// scan computed it: not hashed again per request.
	NameHash []uint64
	Name     []uint32
	ID       []uint64
	Time     []int64
	// Labels appends the labels of sample i's series other than __name__
	// to dst. Called only for a series new to the window.
	Labels func(i int, dst []Label) []Label
}

// Len is the number of samples.
func (ss *Series) Len() int { return len(ss.ID) }

// ObserveSeries is Observe for samples given as a Series.
func (s *Stats) ObserveSeries(tenant string, ss *Series, recordBytes int) {
	n := ss.Len()
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(s.now().UnixNano() / int64(s.cfg.Window))
	g := int(s.epoch & 1)
	ep := uint64(s.epoch) & epochMask
	t := s.tenant(tenant)
	// Descriptors once per name, as resolve does for the decoded batch's
	// gauge descriptors.
	s.bd = s.bd[:0]
	if cap(s.ds) < len(ss.Names) {
		s.ds = make([][3]int64, len(ss.Names))
	}
	s.ds = s.ds[:len(ss.Names)]
	hashed := len(ss.NameHash) == len(ss.Names)
	for j, name := range ss.Names {
		var nh uint64
		if hashed {
			nh = ss.NameHash[j]
		} else {
			nh = xxhash.Sum64(name)
		}
		h := descHash(t, nh, gaugeFold^rwFold)
		di := s.descs[h]
		if di == nil {
			di = s.describeName(t, unsafex.String(name), "", signal.MetricGauge, false, true, h)
			s.descs[h] = di
		}
		s.bd = append(s.bd, di)
	}
	minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
	var total int64
	// lastKey is the series of the previous sample when it is counted in
	// this window: the further samples of a series sent together (a
	// sender's batch of several samples per series) skip the table.
	var lastKey uint64
	// The table's words of a block of samples are read first, in a loop
	// of independent loads, so that their cache misses (one a sample
	// when the table does not stay cached next to the requests) overlap
	// instead of coming one after the other. A word read there that
	// holds the series in this window still does when its sample comes:
	// nothing leaves the table during a call.
	var keys, words [observeBlock]uint64
	for b0 := 0; b0 < n; b0 += observeBlock {
		m := min(observeBlock, n-b0)
		mask := len(s.slots) - 1
		for j := 0; j < m; j++ {
			k := seriesKey(mix(ss.ID[b0+j] ^ s.bd[ss.Name[b0+j]].fold))
			keys[j] = k
			words[j] = s.slots[int(k>>epochBits)&mask]
		}
		for j := 0; j < m; j++ {
			i := b0 + j
			d := s.bd[ss.Name[i]]
			if d.kind == kindNone {
				continue
			}
			ts := ss.Time[i]
			minT, maxT = min(minT, ts), max(maxT, ts)
			s.ds[ss.Name[i]][0]++
			total++
			key := keys[j]
			if key == lastKey {
				continue
			}
			if words[j] == key|ep {
				lastKey = key // in its home slot, in this window
				continue
			}
			lastKey = s.observeSeriesSample(ss, i, d, key, g, ep)
		}
	}
	s.finishObserve(t, g, minT, maxT, total, recordBytes)
}

// observeBlock is how many samples' table words ObserveSeries reads ahead.
const observeBlock = 32

// observeSeriesSample looks up sample i's series (key) in the table and
// counts it when it is new to the window; it returns the key when the
// series is in the table now (ObserveSeries's lastKey), else 0 (past
// MaxSeries: not tracked, its points counted in overSeries).
func (s *Stats) observeSeriesSample(ss *Series, i int, d *descInfo, key uint64, g int, ep uint64) uint64 {
	p, w := s.find(key)
	if w != 0 {
		if w&epochMask == ep {
			return key
		}
		s.labelsOfSeries(ss, i, d)
		s.account(nil, i, d, 1-g, s.nbs[p], -1)
		s.account(nil, i, d, g, 0, 1)
		s.slots[p], s.nbs[p] = key|ep, 0
		return key
	}
	if s.used >= s.cfg.MaxSeries {
		s.overSeries++
		return 0
	}
	p = s.insert(p, key)
	s.slots[p], s.nbs[p] = key|ep, 0
	s.labelsOfSeries(ss, i, d)
	s.account(nil, i, d, g, 0, 1)
	return key
}

// gaugeFold is the unit-and-type part of descHash for a gauge without
// unit: what every remote-write float sample is.
var gaugeFold = typeFold(xxhash.Sum64(nil), signal.MetricGauge, 0, false)

// labelsOfSeries is labelsOf for sample i of ss, a remote-write series:
// no resource, so no service_name, job or instance of sluice's own, and
// every label keeps exactly its name.
func (s *Stats) labelsOfSeries(ss *Series, i int, _ *descInfo) {
	s.sb.Reset()
	s.sl = ss.Labels(i, s.sl[:0])
	s.kv = s.kv[:0]
	for _, l := range s.sl {
		key := s.labelKey(l.Name)
		s.kv = append(s.kv, promname.AttrLabel{Label: key, Key: key, Value: unsafex.String(l.Value)})
	}
	s.finishLabels()
}

// finishLabels turns s.kv and the labels in s.sb into s.lbls.
func (s *Stats) finishLabels() {
	promname.SortAttrLabels(s.kv)
	promname.JoinCollisions(&s.sb, s.kv)
	s.sb.Sort()
	s.sb.Overwrite(&s.ls)
	s.lbls = s.lbls[:0]
	s.ls.Range(func(l labels.Label) {
		s.lbls = append(s.lbls, lbl{l.Name, l.Value, pairHash(l.Name, l.Value)})
	})
}

// maxLabelKeys bounds the label names ObserveSeries remembers; past it the
// table starts again.
const maxLabelKeys = 4096

// labelKey returns a remote-write label name as a string, remembered
// across calls: a new series costs no string copy per label.
func (s *Stats) labelKey(name []byte) string {
	if k, ok := s.labelKeys[unsafex.String(name)]; ok {
		return k
	}
	if s.labelKeys == nil || len(s.labelKeys) >= maxLabelKeys {
		s.labelKeys = make(map[string]string)
	}
	key := string(name)
	s.labelKeys[key] = key
	return key
}

// rwLast is the point rwKey keyed last in the batch Observe counts (reset
// per call): the next point of the same series (its descriptor, resource
// and attribute set alike) has its key.
type rwLast struct {
	desc     uint32
	res      uint32
	attr     signal.Range
	key      uint64
	computed bool
}

// rwKey is the key of point i of a remote-write batch b: the prw.LabelsKey
// of its labels (its metric name as __name__ and its attributes), which
// ObserveSeries gets from the scan for the same series, so that a series
// counts once whether its request was scanned or decoded. A point no
// remote-write request makes (its resource has attributes, or an attribute
// is not a string: an OTLP batch under the remote-write scope name) keeps
// its series id, id.
func (s *Stats) rwKey(b *signal.Metrics, i int, id uint64) uint64 {
	c := &b.Common
	r := b.Attr[i]
	l := &s.lastKey
	if l.computed && l.desc == b.Desc[i] && l.res == b.Resource[i] && l.attr == r {
		return l.key
	}
	if b.Resources[b.Resource[i]].Attrs.Len() > 0 {
		return id
	}
	if s.rwKeys == nil {
		s.rwKeys = make([]rwKeySlot, rwKeySlots)
	}
	slot := &s.rwKeys[id&(rwKeySlots-1)]
	if slot.id == id && slot.key != 0 {
		*l = rwLast{desc: b.Desc[i], res: b.Resource[i], attr: r, key: slot.key, computed: true}
		return slot.key
	}
	ord := s.ord[:0]
	sorted := true
	for a := r.Start; a < r.End; a++ {
		if c.Attrs.Type[a] != signal.ValueString {
			s.ord = ord
			return id
		}
		if len(ord) > 0 && c.Keys.Name(c.Attrs.Key[ord[len(ord)-1]]) >= c.Keys.Name(c.Attrs.Key[a]) {
			sorted = false
		}
		ord = append(ord, a)
	}
	if !sorted { // the decoder sorts them; an OTLP batch may not
		slices.SortStableFunc(ord, func(x, y uint32) int {
			return strings.Compare(c.Keys.Name(c.Attrs.Key[x]), c.Keys.Name(c.Attrs.Key[y]))
		})
	}
	s.ord = ord
	name := b.Bytes(b.Descs[b.Desc[i]].Name)
	f := s.fields[:0]
	named := false
	for _, a := range ord {
		k := c.Keys.Name(c.Attrs.Key[a])
		if !named && k > labels.MetricName {
			f, named = prw.AppendLabelField(f, labels.MetricName, unsafex.String(name)), true
		}
		f = prw.AppendLabelField(f, k, c.AttrString(int(a)))
	}
	if !named {
		f = prw.AppendLabelField(f, labels.MetricName, unsafex.String(name))
	}
	s.fields = f
	*l = rwLast{desc: b.Desc[i], res: b.Resource[i], attr: r, key: prw.LabelsKey(f), computed: true}
	*slot = rwKeySlot{id: id, key: l.key}
	return l.key
}

// rwKeySlots is the size of rwKey's memo (16 bytes a slot: 2 MiB, made on
// the first decoded remote-write batch): a series is written out and
// hashed once, then found by its series id, which is trusted as its
// identity as the lake trusts it (signal.SeriesID covers the name, the
// resource and every attribute with its type). A slot another series
// takes is computed again when its series comes back.
const rwKeySlots = 1 << 17

type rwKeySlot struct{ id, key uint64 }
