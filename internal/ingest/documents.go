package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// A file holds one OTLP export request or a sequence of them, in one of the
// shapes producers write (a whole-file gzip or zstd is undone first, in
// read.go):
//
//   - one protobuf or JSON request: what an SDK, `otlp_proto`/`otlp_json`
//     marshalers (the Collector's awss3exporter) and hand-made files hold;
//   - JSON requests one after another, usually one a line: the Collector's
//     file exporter with `format: json`;
//   - requests each preceded by its length as a 4-byte big-endian integer:
//     the file exporter with `format: proto`, and with `compression: zstd`
//     when its native-compression feature gate is off, which compresses each
//     request on its own (a zstd frame inside each length).
//
// One file may hold several signals: a file exporter that serves the logs,
// metrics and traces pipelines writes all three to one path. Each request is
// sniffed and decoded on its own, into the batch of its signal.

// kinds is a set of signals, one bit per signal.Kind.
type kinds uint8

func (k kinds) has(s signal.Kind) bool { return k&(1<<s) != 0 }

// decodeFile decodes every request in content into b, which it resets
// first, and returns the signals the file held. On error the batches hold
// a part of the file and must not be written.
func (r *fileReader) decodeFile(content []byte, b *batches) (kinds, error) {
	b.logs.Reset()
	b.metrics.Reset()
	b.spans.Reset()
	var held kinds
	kind, format, sniffErr := otlp.Sniff(content)
	switch {
	case sniffErr == nil && format == otlp.FormatJSON:
		err := otlp.EachJSONDocument(content, func(doc []byte) error {
			return decodeRequest(doc, b, &held)
		})
		return held, err
	case sniffErr == nil:
		return held, decodeAs(content, kind, format, b, &held)
	}
	framed, err := lengthFramed(content)
	if err != nil {
		return 0, err
	}
	if !framed {
		return 0, sniffErr
	}
	var decoded int64
	for n, i := 1, 0; i < len(content); n++ {
		size := int(binary.BigEndian.Uint32(content[i:]))
		msg := content[i+4 : i+4+size]
		if bytes.HasPrefix(msg, zstdMagic) {
			if msg, err = r.unzstdMessage(msg, r.maxBytes-decoded); err != nil {
				return held, fmt.Errorf("message %d (offset %d): %w", n, i, err)
			}
			decoded += int64(len(msg))
		}
		if err := decodeRequest(msg, b, &held); err != nil {
			return held, fmt.Errorf("message %d (offset %d): %w", n, i, err)
		}
		i += 4 + size
	}
	return held, nil
}

// lengthFramed reports whether content is a sequence of length-prefixed
// requests that ends exactly at its end. A file whose first byte is 0 (no
// protobuf request starts so: field 0 does not exist) and whose frames run
// past its end is an error that says so: a file cut short, e.g. one still
// being written.
func lengthFramed(content []byte) (bool, error) {
	i := 0
	for n := 1; i < len(content); n++ {
		if len(content)-i < 4 {
			break
		}
		size := int64(binary.BigEndian.Uint32(content[i:]))
		if size > int64(len(content)-i-4) {
			if content[0] == 0 {
				return false, fmt.Errorf("message %d (offset %d) is cut short: its length says %d bytes, the file has %d more", n, i, size, len(content)-i-4)
			}
			return false, nil
		}
		i += 4 + int(size)
	}
	if i != len(content) {
		if content[0] == 0 {
			return false, fmt.Errorf("%d bytes after the last length-prefixed message (offset %d) are not a message", len(content)-i, i)
		}
		return false, nil
	}
	return true, nil
}

// unzstdMessage decompresses one zstd-compressed request into a buffer of
// its own, refusing more than limit bytes.
func (r *fileReader) unzstdMessage(in []byte, limit int64) ([]byte, error) {
	zd, err := r.zstdDecoder()
	if err != nil {
		return nil, err
	}
	out, err := zd.DecodeAll(in, r.msg[:0])
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || (err == nil && int64(len(out)) > limit) {
		return nil, fmt.Errorf("zstd: %w: more than %d bytes decompressed", ErrTooLarge, r.maxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	r.msg = out
	return out, nil
}

// decodeRequest sniffs one request and appends its records to the batch of
// its signal. A request without records adds nothing.
func decodeRequest(req []byte, b *batches, held *kinds) error {
	kind, format, err := otlp.Sniff(req)
	if err != nil {
		return err
	}
	return decodeAs(req, kind, format, b, held)
}

// decodeAs is decodeRequest for a request already sniffed.
func decodeAs(req []byte, kind signal.Kind, format otlp.Format, b *batches, held *kinds) (err error) {
	json := format == otlp.FormatJSON
	switch kind {
	case signal.KindUnknown:
		return nil
	case signal.KindLogs:
		if json {
			err = otlp.DecodeLogsJSON(&b.logs, req)
		} else {
			err = otlp.DecodeLogs(&b.logs, req)
		}
	case signal.KindMetrics:
		if json {
			err = otlp.DecodeMetricsJSON(&b.metrics, req)
		} else {
			err = otlp.DecodeMetrics(&b.metrics, req)
		}
	case signal.KindTraces:
		if json {
			err = otlp.DecodeTracesJSON(&b.spans, req)
		} else {
			err = otlp.DecodeTraces(&b.spans, req)
		}
	}
	if err == nil {
		*held |= 1 << kind
	}
	return err
}
