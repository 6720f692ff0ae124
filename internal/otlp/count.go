package otlp

import "github.com/sluice-dev/sluice/internal/signal"

// CountRecords counts the records of an OTLP export request of kind in
// protobuf (log records, metric data points or spans) and the messages
// that hold them (resources, scopes and metrics) without decoding them: it
// walks those messages and skips each record whole, so it costs a few
// operations per message and allocates nothing. A receiver calls it to
// refuse a request whose decoded form would be far larger than its body
// (a 2-byte empty record or resource decodes into hundreds of bytes)
// before anything decodes it. ok is false when the structure does not
// parse; the decoder then names the problem.
func CountRecords(kind signal.Kind, b []byte) (records, holders int, ok bool) {
	// The path down to the records: field 1 of the request, field 2 of
	// the resource message, field 2 of the scope message (and, for
	// metrics, the data field of the metric, then its field 1).
	ok = eachLen(b, 1, func(res []byte) bool {
		holders++
		return eachLen(res, 2, func(scope []byte) bool {
			holders++
			if kind != signal.KindMetrics {
				return eachLen(scope, 2, func([]byte) bool { records++; return true })
			}
			return eachLen(scope, 2, func(metric []byte) bool {
				holders++
				return eachField(metric, func(field uint64, data []byte) bool {
					switch field {
					case 5, 7, 9, 10, 11: // gauge, sum, histogram, exponential_histogram, summary
						return eachLen(data, 1, func([]byte) bool { records++; return true })
					}
					return true
				})
			})
		})
	})
	return records, holders, ok
}

// eachLen calls fn with the contents of every length-delimited field
// number field of message b, skipping the others; false when b does not
// parse or fn says stop.
func eachLen(b []byte, field uint64, fn func([]byte) bool) bool {
	return eachField(b, func(f uint64, v []byte) bool { return f != field || fn(v) })
}

// eachField calls fn with the number and contents of every
// length-delimited field of message b; other wire types are skipped.
func eachField(b []byte, fn func(field uint64, v []byte) bool) bool {
	for i := 0; i < len(b); {
		tag, j := uvarint(b, i)
		if j < 0 || tag>>3 == 0 {
			return false
		}
		if tag&7 != wtLen {
			if i = skipValue(b, j, tag, 0); i < 0 {
				return false
			}
			continue
		}
		s, e := lenField(b, j)
		if e < 0 {
			return false
		}
		if !fn(tag>>3, b[s:e]) {
			return false
		}
		i = e
	}
	return true
}
