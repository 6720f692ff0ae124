package otlp

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them
// with %w and says what failed and where; test with errors.Is.
var (
	// ErrTruncated: a varint, fixed-width value or length-delimited field
	// runs past the end of its message.
	ErrTruncated = errors.New("otlp: truncated protobuf")
	// ErrMalformed: bytes that are not protobuf at all (varint longer than
	// 10 bytes, wire type 6 or 7, field number 0, unbalanced groups).
	ErrMalformed = errors.New("otlp: malformed protobuf")
	// ErrWireType: a known field arrived with the wrong wire type.
	ErrWireType = errors.New("otlp: wrong wire type")
	// ErrInvalidUTF8: a string field (name, key, value, body) is not UTF-8.
	ErrInvalidUTF8 = errors.New("otlp: string field not valid UTF-8")
	// ErrIDLength: a trace id is not 16 bytes or a span id not 8 (0 means
	// absent and is fine).
	ErrIDLength = errors.New("otlp: bad trace or span id length")
	// ErrTooDeep: AnyValue arrays and maps nested deeper than maxDepth.
	ErrTooDeep = errors.New("otlp: values nested too deeply")
	// ErrTooLarge: the batch arena would pass 4 GiB, the limit of a Str.
	ErrTooLarge = errors.New("otlp: batch arena full")
	// ErrWrongKind: the request is valid OTLP of another signal.
	ErrWrongKind = errors.New("otlp: wrong signal kind")
	// ErrNotOTLP: Sniff found neither OTLP JSON nor OTLP protobuf.
	ErrNotOTLP = errors.New("not an OTLP export request")
	// ErrLimit: a request past one of Limits (attributes per record or
	// per request); see LimitError.
	ErrLimit = errors.New("otlp: request past a limit")
	// ErrTimestamp: a timestamp of 2^63 ns or more, which int64 cannot
	// hold; see checkTimes.
	ErrTimestamp = errors.New("otlp: timestamp out of range")
	// ErrHistogram: a histogram point of a shape OTLP's data model
	// forbids (bounds not increasing, bucket counts not matching them,
	// exponential scale or offsets out of range); see checkHistograms.
	ErrHistogram = errors.New("otlp: invalid histogram")
	// ErrJSON: OTLP JSON that does not parse or does not fit the schema.
	ErrJSON = errors.New("otlp: invalid OTLP JSON")
)
