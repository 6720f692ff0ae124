package format

import (
	pqformat "github.com/parquet-go/parquet-go/format"
)

// maxPageStatsBytes bounds the header statistics a RawChunk keeps of one
// page (its min and max together); a lake writer writes at most
// pqenc.MaxPageStatBytes.
const maxPageStatsBytes = 64 << 10

// keepStats records the min and max of a data page v2 header's
// statistics, when it has both (a min may be empty when the max is not),
// for PageStats.
func (rc *RawChunk) keepStats(p *RawPage, st *pqformat.Statistics) {
	if st.MaxValue == nil || len(st.MinValue)+len(st.MaxValue) > maxPageStatsBytes {
		return
	}
	b := int32(len(rc.stats))
	rc.stats = append(rc.stats, st.MinValue...)
	m := int32(len(rc.stats))
	rc.stats = append(rc.stats, st.MaxValue...)
	p.stats = [4]int32{b, m, m, int32(len(rc.stats))}
	p.hasStats = true
}

// PageStats returns the min and max values of data page k's header
// statistics (PLAIN, byte arrays without their length), when its header
// has them. They are as the writer wrote them, outside the page's CRC:
// the caller checks them against what else it knows of the page (the
// column index). Valid until the next ReadRawChunk.
func (rc *RawChunk) PageStats(k int) (lo, hi []byte, ok bool) {
	if k < 0 || k >= len(rc.Pages) || !rc.Pages[k].hasStats {
		return nil, nil, false
	}
	s := rc.Pages[k].stats
	return rc.stats[s[0]:s[1]:s[1]], rc.stats[s[2]:s[3]:s[3]], true
}
