package prwexporter

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/exporter/sending"
)

// fields returns the top-level fields of a message, each as its bytes
// (tag included), and the field numbers.
func fields(t *testing.T, b []byte) ([][]byte, []protowire.Number) {
	t.Helper()
	var out [][]byte
	var nums []protowire.Number
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal("an output part does not parse")
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			t.Fatal("an output part does not parse")
		}
		out = append(out, b[:n+m])
		nums = append(nums, num)
		b = b[n+m:]
	}
	return out, nums
}

// resolveV2Field renders a 2.0 TimeSeries message with every symbol
// reference (labels, exemplars' labels, metadata's help and unit)
// replaced by its symbol; ok is false for a reference past syms.
func resolveV2Field(ts []byte, syms [][]byte) (string, bool) {
	var sb strings.Builder
	refs := func(typ protowire.Type, v []byte) bool {
		var rs []uint32
		var ok bool
		if rs, ok = appendRefs(nil, typ, v); !ok {
			return false
		}
		for _, r := range rs {
			if int(r) >= len(syms) {
				return false
			}
			fmt.Fprintf(&sb, "%q ", syms[r])
		}
		return true
	}
	for b := ts; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if n < 0 || m < 0 {
			return "", false
		}
		switch {
		case num == 1:
			sb.WriteString("labels ")
			if !refs(typ, b[n:n+m]) {
				return "", false
			}
		case (num == 4 || num == 5) && typ == protowire.BytesType:
			fmt.Fprintf(&sb, "[%d ", num)
			sub, _ := protowire.ConsumeBytes(b[n:])
			for len(sub) > 0 {
				sn, st, x := protowire.ConsumeTag(sub)
				y := protowire.ConsumeFieldValue(sn, st, sub[x:])
				if x < 0 || y < 0 {
					return "", false
				}
				if (num == 4 && sn == 1) || (num == 5 && (sn == 3 || sn == 4) && st == protowire.VarintType) {
					fmt.Fprintf(&sb, "%d:", sn)
					if !refs(st, sub[x:x+y]) {
						return "", false
					}
				} else {
					fmt.Fprintf(&sb, "%x ", sub[:x+y])
				}
				sub = sub[x+y:]
			}
			sb.WriteString("] ")
		default:
			fmt.Fprintf(&sb, "%x ", b[:n+m])
		}
		b = b[n+m:]
	}
	return sb.String(), true
}

// FuzzSplit: the splitter of lanes and shard mode takes any record (1.0
// or 2.0) whole or not at all. Taken, every series of the record is in
// exactly one part, in the record's order: 1.0 byte for byte (and the
// other fields in the metadata, in order), 2.0 reading the same through
// its part's symbols table ("" first); the part is the one of its sorted
// labels' hash (as Prometheus's decoder reads them). Refused, the parts
// are as before.
func FuzzSplit(f *testing.F) {
	recs, _, _ := passRecords(&testing.T{}, 2)
	for _, r := range recs {
		raw, _ := snappy.Decode(nil, r.Body)
		f.Add(raw, false, uint8(4), false)
		f.Add(raw, false, uint8(2), true)
	}
	for _, r := range v2Records(&testing.T{}, 2, 20) {
		raw, _ := snappy.Decode(nil, r.Body)
		f.Add(raw, true, uint8(4), false)
		f.Add(raw, true, uint8(3), true)
	}
	prior := map[bool][]byte{}
	{
		raw, _ := snappy.Decode(nil, recs[0].Body)
		prior[false] = raw
		raw, _ = snappy.Decode(nil, v2Records(&testing.T{}, 1, 10)[0].Body)
		prior[true] = raw
	}
	ring := sending.NewRing([]string{"http://a", "http://b", "http://c"})
	f.Fuzz(func(t *testing.T, body []byte, v2 bool, nl uint8, shard bool) {
		n := int(nl%8) + 1
		s := newSplitter(n, shard, ring, 3)
		s.reset(v2)
		if err := s.add(prior[v2]); err != nil {
			t.Fatalf("a valid record refused: %v", err)
		}
		before := make([]struct{ body, ser []byte }, len(s.parts))
		for i, p := range s.parts {
			before[i].body, before[i].ser = slices.Clone(p.body), slices.Clone(p.ser)
		}
		meta0 := slices.Clone(s.meta)
		if err := s.add(body); err != nil {
			for i, p := range s.parts {
				if !bytes.Equal(p.body, before[i].body) || !bytes.Equal(p.ser, before[i].ser) {
					t.Fatalf("a refused record changed part %d", i)
				}
			}
			if !bytes.Equal(s.meta, meta0) {
				t.Fatal("a refused record changed the metadata")
			}
			return
		}
		if !v2 {
			checkSplitV1(t, s, before, meta0, body)
		} else {
			checkSplitV2(t, s, before, body)
		}
	})
}

func checkSplitV1(t *testing.T, s *splitter, before []struct{ body, ser []byte }, meta0, body []byte) {
	in, nums := fields(t, body)
	var wantMeta []byte
	var wantSeries [][]byte
	for i, f := range in {
		if nums[i] == 1 && f[0]&7 == byte(protowire.BytesType) {
			wantSeries = append(wantSeries, f)
		} else {
			wantMeta = append(wantMeta, f...)
		}
	}
	if !bytes.Equal(s.meta, append(meta0, wantMeta...)) {
		t.Fatal("the record's other fields are not the metadata, in order")
	}
	next := 0 // the series are in the parts in the record's order: merge them back
	pos := make([]int, len(s.parts))
	for i := range s.parts {
		pos[i] = len(before[i].body)
	}
	for _, w := range wantSeries {
		found := -1
		for i := range s.parts {
			p := s.parts[i].body[pos[i]:]
			if bytes.HasPrefix(p, w) {
				if found >= 0 {
					t.Fatal("ambiguous")
				}
				found = i
			}
		}
		if found < 0 {
			t.Fatalf("series %d of the record is in no part, in order", next)
		}
		pos[found] += len(w)
		var ts prompb.TimeSeries
		msg, _ := protowire.ConsumeBytes(w[protowire.SizeTag(1):])
		if ts.Unmarshal(msg) == nil {
			ls := slices.Clone(ts.Labels)
			slices.SortStableFunc(ls, cmpLabel)
			if !hasDupNames(ls) && s.partOf(seriesHash(withoutEmpty(ls))) != found {
				t.Fatalf("series %v in part %d, want %d", ls, found, s.partOf(seriesHash(withoutEmpty(ls))))
			}
		}
		next++
	}
	for i := range s.parts {
		if pos[i] != len(s.parts[i].body) {
			t.Fatalf("part %d holds bytes of no series of the record", i)
		}
	}
}

// withoutEmpty is ls without its labels of empty value, as decoders read
// them (split.go, emptyLabel).
func withoutEmpty(ls []prompb.Label) []prompb.Label {
	return slices.DeleteFunc(slices.Clone(ls), func(l prompb.Label) bool { return l.Value == "" })
}

func hasDupNames(ls []prompb.Label) bool {
	for i := 1; i < len(ls); i++ {
		if ls[i].Name == ls[i-1].Name {
			return true
		}
	}
	return false
}

func checkSplitV2(t *testing.T, s *splitter, before []struct{ body, ser []byte }, body []byte) {
	in, nums := fields(t, body)
	var syms [][]byte
	for i, f := range in {
		if nums[i] == 4 && f[0]&7 == byte(protowire.BytesType) {
			v, _ := protowire.ConsumeBytes(f[1:])
			syms = append(syms, v)
		}
	}
	var want []string
	for i, f := range in {
		if nums[i] != 5 || f[0]&7 != byte(protowire.BytesType) {
			continue
		}
		v, _ := protowire.ConsumeBytes(f[1:])
		r, ok := resolveV2Field(v, syms)
		if !ok {
			t.Fatal("a record with a reference past its symbols was taken")
		}
		want = append(want, r)
	}
	var got []string
	for i := range s.parts {
		p := &s.parts[i]
		if len(p.ser) == len(before[i].ser) {
			continue
		}
		ps, _ := fields(t, p.body)
		var psyms [][]byte
		for _, f := range ps {
			v, _ := protowire.ConsumeBytes(f[1:])
			psyms = append(psyms, v)
		}
		if len(psyms[0]) != 0 {
			t.Fatalf("part %d: symbol 0 is %q, want \"\"", i, psyms[0])
		}
		series, _ := fields(t, p.ser[len(before[i].ser):])
		for _, f := range series {
			v, _ := protowire.ConsumeBytes(f[1:])
			r, ok := resolveV2Field(v, psyms)
			if !ok {
				t.Fatalf("part %d: a series refers past its part's symbols", i)
			}
			got = append(got, r)
			// The part of its labels' hash.
			var refs []uint32
			for m := v; len(m) > 0; {
				num, typ, n := protowire.ConsumeTag(m)
				k := protowire.ConsumeFieldValue(num, typ, m[n:])
				if num == 1 {
					refs, _ = appendRefs(refs, typ, m[n:n+k])
				}
				m = m[n+k:]
			}
			var ls []prompb.Label
			for j := 0; j+1 < len(refs); j += 2 {
				ls = append(ls, prompb.Label{Name: string(psyms[refs[j]]), Value: string(psyms[refs[j+1]])})
			}
			slices.SortStableFunc(ls, cmpLabel)
			if !hasDupNames(ls) && s.partOf(seriesHash(withoutEmpty(ls))) != i {
				t.Fatalf("series %v in part %d, want %d", ls, i, s.partOf(seriesHash(withoutEmpty(ls))))
			}
		}
		// Prometheus's own decoding of the part reads the same as of the record.
		var preq, ireq writev2.Request
		if ireq.Unmarshal(body) == nil {
			if err := preq.Unmarshal(append(slices.Clone(p.body), p.ser...)); err != nil {
				t.Fatalf("part %d does not decode: %v", i, err)
			}
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the parts' series read\n%q\nwant\n%q", got, want)
	}
}
