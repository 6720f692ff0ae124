package prw

import (
	"bytes"

	"github.com/sluice-dev/sluice/internal/signal"
)

// This file is the lake writer's side of the scan (helper plake, issue
// 13's remote write -> lake): the lake loop appends a plain request's
// points straight into the writer's partition batch, so the writer does
// not copy a decoded batch (signal.Metrics.CopyRows was a third of the
// lake loop's CPU).

var scopeNameBytes, v1Bytes = []byte(ScopeName), []byte("1.0")

// Appender appends scanned requests to batches (AppendV1). Its scratch
// space is reused across calls; use one per goroutine.
type Appender struct {
	descOf []uint32 // Names index -> descriptor in dst + 1
	names  keyMemo
	keys   []signal.KeyID
	vals   [][]byte
}

// AppendV1 appends the points of the request of s's last ScanV1, which
// must have returned true (and whose body must still be valid), to dst: the points DecodeV1 would decode (one
// resource, one scope, a gauge descriptor per metric name, per sample a
// double point with its labels other than __name__ as string attributes,
// its time and its series id), with the attribute values and sets
// interned in dst as signal.Metrics.CopyRows interns them (see
// signal.Metrics.InternStrAttrs), so that the result is the copy of the
// decoded request into dst, without the decoded request.
// TestAppendV1MatchesDecodeCopy checks that it is.
func (x *Appender) AppendV1(dst *signal.Metrics, s *Scanner) {
	c := &dst.Common
	res, sc := dst.AddBareResourceScope(scopeNameBytes, v1Bytes)
	x.descOf = append(x.descOf[:0], make([]uint32, len(s.Names))...)
	x.names.reset()

	body := s.body
	j := 0 // the sample index into Name, ID and Time
	for i := 0; i < len(body); {
		st, e := lenField(body, i+1)
		b := body[:e]
		keys, vals := x.keys[:0], x.vals[:0]
		p := st
		k := 0
		for p < e && b[p] == 1<<3|wtLen {
			n, v, le := labelAt(b, p)
			p = le
			if string(n) == nameLabel {
				continue
			}
			id := x.names.id(c, k, n)
			k++
			keys, vals = append(keys, id), append(vals, v)
		}
		x.keys, x.vals = keys, vals
		attr := dst.InternStrAttrs(keys, vals)
		ni := s.Name[j]
		if x.descOf[ni] == 0 {
			// One descriptor per metric in a partition, as copies give.
			x.descOf[ni] = dst.InternGaugeDesc(s.Names[ni]) + 1
		}
		desc := x.descOf[ni] - 1
		for p < e {
			ss, se := lenField(b, p+1)
			var v uint64
			var ts int64
			sampleV1(b, ss, se, &v, &ts)
			pt := dst.AppendPoint(desc, res, sc)
			dst.Time[pt] = s.Time[j]
			dst.Attr[pt] = attr
			dst.NumberType[pt] = signal.ValueDouble
			dst.Number[pt] = v
			dst.SeriesID[pt] = s.ID[j]
			j++
			p = se
		}
		i = e
	}
	clear(x.vals[:cap(x.vals)]) // they alias the body
	x.names.forget()
}

// keyMemo remembers the key ids of the previous series' label names by
// position (__name__ left out): a series named as the one before it takes
// each id with a compare instead of a lookup in the batch's keys.
type keyMemo struct {
	names [][]byte // alias a request body
	ids   []signal.KeyID
}

func (m *keyMemo) reset() { m.names, m.ids = m.names[:0], m.ids[:0] }

// id returns the key id in c of label name n, its series' k-th, and
// remembers it for the next series' k-th.
func (m *keyMemo) id(c *signal.Common, k int, n []byte) signal.KeyID {
	if k < len(m.names) && bytes.Equal(m.names[k], n) {
		return m.ids[k]
	}
	id := c.Keys.ID(n)
	if k < len(m.names) {
		m.names[k], m.ids[k] = n, id
	} else {
		m.names, m.ids = append(m.names, n), append(m.ids, id)
	}
	return id
}

// forget drops the names, which alias a request body.
func (m *keyMemo) forget() { clear(m.names[:cap(m.names)]) }

// ArenaBytes is the size of the body of s's last ScanV1, which DecodeV1
// copies into its batch's arena: with Attrs and Samples it gives the lake
// writer's size estimate of the decoded batch.
func (s *Scanner) ArenaBytes() int { return len(s.body) + len(ScopeName) + len("1.0") }
