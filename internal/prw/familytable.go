package prw

import (
	"sync"

	"github.com/sluice-dev/sluice/internal/signal"
)

// FamilyTable remembers the remote write 1.0 metadata of metric families,
// per tenant, so that series sent in other requests can carry it.
// Prometheus sends its metadata in requests of their own (every
// metadata_config.send_interval), never beside the series; a converter
// that puts metadata on each series (remote write 2.0, OTLP) learns it
// from those requests and describes later series of the family with it.
//
// The table is bounded by the text it holds (names, help and unit): an
// entry that does not fit is refused and counted, and an entry already
// held is updated in place when the sender changes it. Safe for
// concurrent use.
type FamilyTable struct {
	// OnRefused, when set before use, is called for each entry refused
	// (a counter's Inc).
	OnRefused func()

	mu       sync.Mutex
	tenants  map[string]map[string]FamilyMetadata
	bytes    int
	maxBytes int
	refused  uint64
}

// DefaultFamilyTableBytes bounds a FamilyTable made with zero: Prometheus
// describes a few hundred families per target, 100-300 bytes each.
const DefaultFamilyTableBytes = 16 << 20

// NewFamilyTable returns a table holding at most maxBytes of family text
// (DefaultFamilyTableBytes when maxBytes <= 0).
func NewFamilyTable(maxBytes int) *FamilyTable {
	if maxBytes <= 0 {
		maxBytes = DefaultFamilyTableBytes
	}
	return &FamilyTable{tenants: make(map[string]map[string]FamilyMetadata), maxBytes: maxBytes}
}

// entryCost is what an entry counts against the bound: its text and a
// map slot.
func entryCost(tenant string, m FamilyMetadata) int {
	return len(tenant) + len(m.Name) + len(m.Type) + len(m.Help) + len(m.Unit) + 64
}

// LearnV1 remembers the metadata of req, a snappy-decoded remote write 1.0
// WriteRequest, for tenant. Entries the decoder refuses (no family name,
// text that is not UTF-8 or too long) are not learnt; a malformed request
// teaches what precedes the damage. It returns how many entries it learnt.
func (t *FamilyTable) LearnV1(tenant string, req []byte) int {
	ms, _, _ := FamilyMetadataV1(req) // allocates nothing for a request without metadata
	if len(ms) == 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fams := t.tenants[tenant]
	n := 0
	for _, m := range ms {
		old, had := fams[m.Name]
		if had && old == m {
			n++
			continue
		}
		grow := entryCost(tenant, m)
		if had {
			grow -= entryCost(tenant, old)
		}
		if t.bytes+grow > t.maxBytes {
			t.refused++
			if t.OnRefused != nil {
				t.OnRefused()
			}
			continue
		}
		if fams == nil {
			fams = make(map[string]FamilyMetadata)
			t.tenants[tenant] = fams
		}
		fams[m.Name] = m
		t.bytes += grow
		n++
	}
	return n
}

// Refused returns how many entries did not fit the table's bound.
func (t *FamilyTable) Refused() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

// Describe gives each descriptor of m from index from on that carries no
// metadata (no type, unit or help: a 1.0 series whose request had no
// metadata for it) the metadata tenant's family of its name was last
// sent with: the name itself, or the name without a _total, _bucket,
// _sum, _count, _created or _info suffix (FamilyOf). It returns how many
// descriptors it described.
func (t *FamilyTable) Describe(tenant string, m *signal.Metrics, from int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	fams := t.tenants[tenant]
	if len(fams) == 0 {
		return 0
	}
	n := 0
	for i := from; i < len(m.Descs); i++ {
		d := &m.Descs[i]
		if d.Metadata.Len() > 0 || d.Description.Len() > 0 {
			continue
		}
		for fam := range FamilyOf(m.String(d.Name)) {
			if f, ok := fams[fam]; ok {
				describe(&m.Common, d, f.Type, f.Help, f.Unit)
				n++
				break
			}
		}
	}
	return n
}

// describe sets a descriptor's help, and its type and unit as the
// AttrType and AttrUnit metadata attributes, as the decoder does for
// metadata sent in the series' own request.
func describe(c *signal.Common, md *signal.MetricDesc, typ, help, unit string) {
	if len(help) > 0 {
		md.Description = c.AppendString(help)
	}
	a := uint32(c.Attrs.Len())
	c.Attrs.Append(c.Keys.IDString(AttrType), signal.ValueString, uint64(c.AppendString(typ)))
	if len(unit) > 0 {
		c.Attrs.Append(c.Keys.IDString(AttrUnit), signal.ValueString, uint64(c.AppendString(unit)))
	}
	md.Metadata = signal.Range{Start: a, End: uint32(c.Attrs.Len())}
}
