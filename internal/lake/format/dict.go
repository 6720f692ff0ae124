package format

import (
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// DictionaryValues returns the values of a top-level string column's
// dictionaries, reading one page per row group (not deduplicated: a value
// may be in the dictionary of several row groups). It returns nil
// (unknown) unless every data page of the column is dictionary-encoded: a
// writer that fell back to plain encoding has values outside the dictionary.
func DictionaryValues(pf *parquet.File, column string, limit int) []string {
	leaf, ok := pf.Schema().Lookup(column)
	if !ok || leaf.Node.Type().Kind() != parquet.ByteArray {
		return nil
	}
	var values []string
	meta := pf.Metadata().RowGroups
	for i, rg := range pf.RowGroups() {
		if !dictionaryOnly(meta[i].Columns[leaf.ColumnIndex].MetaData.EncodingStats) {
			return nil
		}
		pages := PagesRange(rg.ColumnChunks()[leaf.ColumnIndex], 0, 1)
		page, err := pages.ReadPage()
		pages.Close()
		if err != nil {
			return nil
		}
		dict := page.Dictionary()
		if dict == nil || len(values)+dict.Len() > limit {
			return nil
		}
		for j := range dict.Len() {
			values = append(values, dict.Index(int32(j)).String())
		}
	}
	return values
}

func dictionaryOnly(stats []format.PageEncodingStats) bool {
	data := false
	for _, st := range stats {
		if st.PageType != format.DataPage && st.PageType != format.DataPageV2 {
			continue
		}
		if st.Encoding != format.RLEDictionary && st.Encoding != format.PlainDictionary {
			return false
		}
		data = true
	}
	return data
}
