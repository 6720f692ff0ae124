package prom

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// Overflow labels (docs/schema.md, "Bounded schema"): a file past
// lake.max_attribute_columns keeps the rest of a point's attributes in
// attr_overflow, one JSON object of key → OTLP JSON AnyValue per row.
// They are labels like the attribute columns' (string, int, double and
// bool values; bytes, arrays, maps and empty values have none), so a
// series keeps all of its labels whatever column cap its file had.

func isPointOverflow(col string) bool { return col == format.ColAttrOverflow }

// readOverflowLabels adds the overflow labels of the sc.need rows to kvs.
func (sc *scan) readOverflowLabels(pf *parquet.File, idx *fileIndex, g int, r run, total int64, kvs [][]attrLabel) error {
	if idx.ovfCol < 0 {
		return nil
	}
	if err := sc.addBytes(pf, g, idx.ovfCol, r.end-r.start, total); err != nil {
		return err
	}
	var perr error
	err := format.ReadValuesAt(pf.RowGroups()[g].ColumnChunks()[idx.ovfCol], r.start, r.end, sc.need, func(i int, v parquet.Value) {
		if !v.IsNull() && perr == nil {
			kvs[i], perr = appendOverflowLabels(kvs[i], v.ByteArray(), r.desc.rw)
		}
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("row group %d: attr_overflow: %w", g, err)
	}
	return nil
}

// appendOverflowLabels appends the labels of one overflow object; rw: the
// row was sent by remote write, its labels are the keys verbatim.
func appendOverflowLabels(dst []attrLabel, js []byte, rw bool) ([]attrLabel, error) {
	var obj map[string]struct {
		StringValue *string         `json:"stringValue"`
		BoolValue   *bool           `json:"boolValue"`
		IntValue    json.RawMessage `json:"intValue"`
		DoubleValue json.RawMessage `json:"doubleValue"`
	}
	if err := json.Unmarshal(js, &obj); err != nil {
		return dst, err
	}
	for key, av := range obj {
		label := key
		if !rw {
			label = LabelName(key)
		}
		if label == "" {
			continue
		}
		var val string
		switch {
		case av.StringValue != nil:
			val = *av.StringValue
		case av.BoolValue != nil:
			val = strconv.FormatBool(*av.BoolValue)
		case av.IntValue != nil:
			s := string(av.IntValue)
			if u, err := strconv.Unquote(s); err == nil {
				s = u
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return dst, fmt.Errorf("attribute %q: intValue %s", key, av.IntValue)
			}
			val = strconv.FormatInt(n, 10)
		case av.DoubleValue != nil:
			s := string(av.DoubleValue)
			if u, err := strconv.Unquote(s); err == nil {
				s = u
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				switch s {
				case "Infinity", "-Infinity", "NaN":
					f, _ = strconv.ParseFloat(map[string]string{"Infinity": "+Inf", "-Infinity": "-Inf", "NaN": "NaN"}[s], 64)
				default:
					return dst, fmt.Errorf("attribute %q: doubleValue %s", key, av.DoubleValue)
				}
			}
			val = strconv.FormatFloat(f, 'g', -1, 64)
		default:
			continue
		}
		dst = append(dst, attrLabel{Label: label, Key: key, Value: val})
	}
	return dst, nil
}
