package signal

import (
	"reflect"
	"testing"
)

// TestMovePointAndTruncateCoverEveryColumn fills every per-point column
// (found by reflection, so a column added later is covered) with distinct
// values, moves point 2 to 0, truncates to 1 and checks each column.
func TestMovePointAndTruncateCoverEveryColumn(t *testing.T) {
	var m Metrics
	for range 3 {
		m.AppendPoint(0, 0, 0)
	}
	v := reflect.ValueOf(&m).Elem()
	ty := v.Type()
	columns := 0
	for f := 0; f < ty.NumField(); f++ {
		fv := v.Field(f)
		if !ty.Field(f).IsExported() || fv.Kind() != reflect.Slice || fv.Len() != m.Len() {
			continue
		}
		columns++
		for i := 0; i < fv.Len(); i++ {
			fill(t, ty.Field(f).Name, fv.Index(i), uint64(f*10+i+1))
		}
	}
	if columns < 26 {
		t.Fatalf("found %d per-point columns, want at least 26", columns)
	}
	want := reflect.New(ty).Elem()
	want.Set(v)
	snapshot := map[string]any{}
	for f := 0; f < ty.NumField(); f++ {
		fv := v.Field(f)
		if ty.Field(f).IsExported() && fv.Kind() == reflect.Slice && fv.Len() == m.Len() {
			snapshot[ty.Field(f).Name] = fv.Index(2).Interface()
		}
	}
	m.MovePoint(0, 2)
	m.Truncate(1)
	for name, w := range snapshot {
		fv := v.FieldByName(name)
		if fv.Len() != 1 {
			t.Errorf("%s: len %d after Truncate(1)", name, fv.Len())
			continue
		}
		if got := fv.Index(0).Interface(); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: point 0 is %v, want point 2's %v", name, got, w)
		}
	}
}

func fill(t *testing.T, name string, e reflect.Value, x uint64) {
	switch e.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		e.SetUint(x)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.SetInt(int64(x))
	case reflect.Float64:
		e.SetFloat(float64(x))
	case reflect.Struct: // Range
		e.Field(0).SetUint(x)
		e.Field(1).SetUint(x + 1)
	default:
		t.Fatalf("column %s: element kind %v not handled by the test", name, e.Kind())
	}
}
