package signal

import (
	"reflect"
	"testing"
)

// dirty sets every number inside v to a non-zero value.
func dirty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Array, reflect.Slice:
		for i := range v.Len() {
			dirty(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				dirty(v.Field(i))
			}
		}
	}
}

// rowColumns returns the exported per-row slice fields of batch b (a
// pointer to Logs, Metrics or Spans), by name.
func rowColumns(b any) map[string]reflect.Value {
	v := reflect.ValueOf(b).Elem()
	out := map[string]reflect.Value{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && !f.Anonymous && f.Type.Kind() == reflect.Slice {
			out[f.Name] = v.Field(i)
		}
	}
	return out
}

// TestAppendRowsMatch: AppendRecords, AppendPoints and AppendSpans append
// exactly what as many AppendRecord, AppendPoint and AppendSpan calls do,
// in every per-row column (a column added to one and not the other fails
// here), into batches whose reused capacity holds old non-zero values.
func TestAppendRowsMatch(t *testing.T) {
	type pair struct {
		name       string
		one, bulk  any
		common     func(any) *Common
		appendOne  func(any)
		appendBulk func(any, int) int
		length     func(any) int
		reset      func(any)
	}
	pairs := []pair{
		{name: "logs", one: new(Logs), bulk: new(Logs),
			common:     func(b any) *Common { return &b.(*Logs).Common },
			appendOne:  func(b any) { b.(*Logs).AppendRecord(3, 4) },
			appendBulk: func(b any, n int) int { return b.(*Logs).AppendRecords(n, 3, 4) },
			length:     func(b any) int { return b.(*Logs).Len() },
			reset:      func(b any) { b.(*Logs).Reset() }},
		{name: "metrics", one: new(Metrics), bulk: new(Metrics),
			common:     func(b any) *Common { return &b.(*Metrics).Common },
			appendOne:  func(b any) { b.(*Metrics).AppendPoint(2, 3, 4) },
			appendBulk: func(b any, n int) int { return b.(*Metrics).AppendPoints(n, 2, 3, 4) },
			length:     func(b any) int { return b.(*Metrics).Len() },
			reset:      func(b any) { b.(*Metrics).Reset() }},
		{name: "spans", one: new(Spans), bulk: new(Spans),
			common:     func(b any) *Common { return &b.(*Spans).Common },
			appendOne:  func(b any) { b.(*Spans).AppendSpan(3, 4) },
			appendBulk: func(b any, n int) int { return b.(*Spans).AppendSpans(n, 3, 4) },
			length:     func(b any) int { return b.(*Spans).Len() },
			reset:      func(b any) { b.(*Spans).Reset() }},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			for _, b := range []any{p.one, p.bulk} {
				// Old rows with non-zero values, reset: the capacity
				// the appends reuse is dirty.
				for range 50 {
					p.appendOne(b)
				}
				for _, col := range rowColumns(b) {
					dirty(col)
				}
				p.reset(b)
				// Some content, so that ranges start past 0.
				c := p.common(b)
				c.AppendBytes([]byte("x"))
				c.Attrs.Append(c.Keys.IDString("k"), ValueInt, 1)
				c.Msgs = append(c.Msgs, 0)
				p.appendOne(b)
			}
			for _, n := range []int{0, 1, 5, 40, 200} {
				want := p.length(p.one)
				for range n {
					p.appendOne(p.one)
				}
				if got := p.appendBulk(p.bulk, n); got != want {
					t.Fatalf("append %d: first row %d, want %d", n, got, want)
				}
				ones, bulks := rowColumns(p.one), rowColumns(p.bulk)
				for name, col := range ones {
					if col.Len() != p.length(p.one) {
						continue // not a per-row column
					}
					if !reflect.DeepEqual(col.Interface(), bulks[name].Interface()) {
						t.Fatalf("after %d rows, column %s differs: bulk %v, one by one %v", n, name, bulks[name].Interface(), col.Interface())
					}
				}
			}
		})
	}
}
