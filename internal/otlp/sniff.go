package otlp

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Format is the encoding of an OTLP export request.
type Format uint8

const (
	FormatUnknown Format = iota
	FormatProto
	FormatJSON
)

func (f Format) String() string {
	switch f {
	case FormatProto:
		return "protobuf"
	case FormatJSON:
		return "json"
	}
	return "unknown"
}

// Sniff tells from content alone whether data is an OTLP JSON or protobuf
// export request and of which signal. A request without records (or a JSON
// request without any resource list) gives KindUnknown and no error: it
// decodes as zero records of any kind. For JSON the top-level key decides
// (of the first document, for JSON lines). For protobuf, whose three
// requests share their outer shape, the fields of the first records decide.
func Sniff(data []byte) (signal.Kind, Format, error) {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		return 0, FormatUnknown, fmt.Errorf("%w: data is gzip-compressed", ErrNotOTLP)
	}
	// A protobuf request starts with 0x0a (field 1), a JSON space, and its
	// length byte may be '{': a JSON guess must parse to count.
	var jsonErr error
	if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '{' {
		k, err := sniffJSON(t)
		if err == nil {
			return k, FormatJSON, nil
		}
		jsonErr = err
	}
	k, err := sniffProto(data)
	if err != nil {
		if jsonErr != nil && data[0] != 0x0a {
			return 0, FormatUnknown, fmt.Errorf("%w: %w", ErrNotOTLP, jsonErr)
		}
		if looksLikeText(data) {
			return 0, FormatUnknown, fmt.Errorf("%w: text that is not OTLP JSON", ErrNotOTLP)
		}
		return 0, FormatUnknown, fmt.Errorf("%w: not OTLP protobuf either: %w", ErrNotOTLP, err)
	}
	return k, FormatProto, nil
}

func sniffJSON(js []byte) (signal.Kind, error) {
	r := jsonReader{b: js}
	for {
		if r.ws(); r.i >= len(r.b) {
			// JSON, but no document named a signal: another kind of file.
			return 0, fmt.Errorf("JSON without resourceLogs, resourceMetrics or resourceSpans")
		}
		if !r.consume('{') {
			return 0, r.errorf("want an object")
		}
		for first := true; ; first = false {
			more, err := r.more('}', first)
			if err != nil {
				return 0, err
			}
			if !more {
				break
			}
			key, err := r.key()
			if err != nil {
				return 0, err
			}
			switch string(key) {
			case "resourceLogs", "resource_logs":
				return signal.KindLogs, nil
			case "resourceMetrics", "resource_metrics":
				return signal.KindMetrics, nil
			case "resourceSpans", "resource_spans":
				return signal.KindTraces, nil
			}
			if err := r.skip(0); err != nil {
				return 0, err
			}
		}
	}
}

// Wire types a record field must have, per kind (wire type + 1; 0: unknown).
var recordShapes = [4][17]uint8{
	signal.KindLogs: {1: wtI64 + 1, 2: wtVarint + 1, 3: wtLen + 1, 5: wtLen + 1, 6: wtLen + 1, 7: wtVarint + 1,
		8: wtI32 + 1, 9: wtLen + 1, 10: wtLen + 1, 11: wtI64 + 1, 12: wtLen + 1},
	signal.KindMetrics: {1: wtLen + 1, 2: wtLen + 1, 3: wtLen + 1, 5: wtLen + 1, 7: wtLen + 1, 9: wtLen + 1,
		10: wtLen + 1, 11: wtLen + 1, 12: wtLen + 1},
	signal.KindTraces: {1: wtLen + 1, 2: wtLen + 1, 3: wtLen + 1, 4: wtLen + 1, 5: wtLen + 1, 6: wtVarint + 1,
		7: wtI64 + 1, 8: wtI64 + 1, 9: wtLen + 1, 10: wtVarint + 1, 11: wtLen + 1, 12: wtVarint + 1,
		13: wtLen + 1, 14: wtVarint + 1, 15: wtLen + 1, 16: wtI32 + 1},
}

// maxSniffRecords bounds the records Sniff looks at when the first ones fit
// more than one kind.
const maxSniffRecords = 16

type sniffer struct {
	fits     uint8 // bit k: every record seen so far fits kind k
	evidence [4]int
	records  int
}

func sniffProto(b []byte) (signal.Kind, error) {
	sn := sniffer{fits: 1<<signal.KindLogs | 1<<signal.KindMetrics | 1<<signal.KindTraces}
	if err := sn.walk(b, 0, 0); err != nil && err != errSniffDone {
		return 0, err
	}
	if sn.records == 0 {
		return signal.KindUnknown, nil
	}
	best, bestEv := signal.KindUnknown, -1
	for k := signal.KindLogs; k <= signal.KindTraces; k++ {
		if sn.fits&(1<<k) != 0 && sn.evidence[k] > bestEv {
			best, bestEv = k, sn.evidence[k]
		}
	}
	if best == signal.KindUnknown {
		return 0, fmt.Errorf("records fit neither logs, metrics nor spans")
	}
	return best, nil
}

var errSniffDone = fmt.Errorf("sniff done")

var levelName = [...]string{"request", "resource message", "scope message"}

// walk visits the three levels every request shares: request field 1,
// resource field 2 (or 1000), scope field 2; level 2 messages are records.
func (sn *sniffer) walk(b []byte, i int, level int) error {
	for i < len(b) {
		tag, j := uvarint(b, i)
		if j < 0 {
			return fmt.Errorf("%s: tag: %w", levelName[level], posErr(j))
		}
		if tag>>3 == 0 {
			return fmt.Errorf("%s: field number 0: %w", levelName[level], ErrMalformed)
		}
		child := tag == 1<<3|wtLen
		if level > 0 {
			child = tag == 2<<3|wtLen || (level == 1 && tag == 1000<<3|wtLen)
		}
		if !child {
			if level > 0 && tag>>3 <= 3 && tag&7 != wtLen {
				return fmt.Errorf("%s: field %d has wire type %d: %w", levelName[level], tag>>3, tag&7, ErrWireType)
			}
			if i = skipValue(b, j, tag, 0); i < 0 {
				return fmt.Errorf("%s: field %d: %w", levelName[level], tag>>3, posErr(i))
			}
			continue
		}
		s, e := lenField(b, j)
		if e < 0 {
			return fmt.Errorf("%s: field %d: %w", levelName[level], tag>>3, posErr(e))
		}
		if level < 2 {
			if err := sn.walk(b[:e], s, level+1); err != nil {
				return err
			}
		} else {
			if err := sn.record(b[:e], s); err != nil {
				return err
			}
			if sn.records >= maxSniffRecords || onlyOne(sn.fits) {
				return errSniffDone
			}
		}
		i = e
	}
	return nil
}

func onlyOne(fits uint8) bool { return fits != 0 && fits&(fits-1) == 0 }

// record narrows the kinds a record fits by its fields' wire types, id
// lengths and string contents, and counts the fields each kind explains.
func (sn *sniffer) record(b []byte, i int) error {
	sn.records++
	fits := uint8(0)
	var ev [4]int
	for k := signal.KindLogs; k <= signal.KindTraces; k++ {
		fits |= 1 << k
	}
	for i < len(b) {
		tag, j := uvarint(b, i)
		if j < 0 {
			return fmt.Errorf("record: tag: %w", posErr(j))
		}
		num, wt := tag>>3, tag&7
		if num == 0 {
			return fmt.Errorf("record: field number 0: %w", ErrMalformed)
		}
		end := skipValue(b, j, tag, 0)
		if end < 0 {
			return fmt.Errorf("record: field %d: %w", num, posErr(end))
		}
		var payload []byte
		if wt == wtLen {
			s, _ := lenField(b, j)
			payload = b[s:end]
		}
		for k := signal.KindLogs; k <= signal.KindTraces; k++ {
			if num >= uint64(len(recordShapes[k])) || recordShapes[k][num] == 0 {
				continue
			}
			if uint64(recordShapes[k][num]-1) != wt || !payloadFits(k, num, payload) {
				fits &^= 1 << k
				continue
			}
			ev[k]++
		}
		i = end
	}
	sn.fits &= fits
	for k := range ev {
		sn.evidence[k] += ev[k]
	}
	return nil
}

func payloadFits(k signal.Kind, num uint64, p []byte) bool {
	switch k {
	case signal.KindLogs:
		switch num {
		case 3, 12:
			return validUTF8(p)
		case 9:
			return len(p) == 16 || len(p) == 0
		case 10:
			return len(p) == 8 || len(p) == 0
		}
	case signal.KindMetrics:
		switch num {
		case 1, 2, 3:
			return validUTF8(p)
		case 5, 7, 9, 10, 11:
			return isMessage(p)
		}
	case signal.KindTraces:
		switch num {
		case 1:
			return len(p) == 16 || len(p) == 0
		case 2, 4:
			return len(p) == 8 || len(p) == 0
		case 3, 5:
			return validUTF8(p)
		}
	}
	return true
}

// isMessage reports whether p parses as a sequence of protobuf fields.
func isMessage(p []byte) bool {
	for i := 0; i < len(p); {
		tag, j := uvarint(p, i)
		if j < 0 || tag>>3 == 0 {
			return false
		}
		if i = skipValue(p, j, tag, 0); i < 0 {
			return false
		}
	}
	return true
}

// wrongKind turns a decode error into ErrWrongKind when the request is
// plainly another signal, which is far more useful than a wire type error
// deep inside the first record.
func wrongKind(err error, pb []byte, want signal.Kind) error {
	k, f, serr := Sniff(pb)
	switch {
	case serr == nil && f == FormatProto && k != signal.KindUnknown && k != want:
		return fmt.Errorf("%w: request holds %s, not %s (%w)", ErrWrongKind, k, want, err)
	case serr == nil && f == FormatJSON:
		return fmt.Errorf("data is OTLP JSON, not protobuf: %w", err)
	}
	return err
}

// looksLikeText reports whether the start of data is printable UTF-8 text,
// which no OTLP protobuf request is (its first byte is a field tag).
func looksLikeText(data []byte) bool {
	head := data[:min(len(data), 512)]
	for len(head) > 0 {
		r, n := utf8.DecodeRune(head)
		if r == utf8.RuneError && n <= 1 && len(head) >= utf8.UTFMax {
			return false
		}
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
		head = head[n:]
	}
	return true
}
