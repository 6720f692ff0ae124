package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Remote-write records. The remote-write receiver decodes a request into a
// batch (to validate, count and run the rules on it) and hands the consumer
// the request as it arrived too (snappy block encoded). When no rule
// changed the batch, the consumer queues that request as it is (encPRW1,
// encPRW2) instead of encoding the batch as OTLP; whoever reads the record
// (lake loop, tail, exporters) snappy-decodes it and decodes it with
// package prw, the same decoder the receiver ran, so it gets the same batch
// the OTLP record would have given, without the OTLP round trip. Snappy as
// received, not decoded: the queue writes 3-5x fewer bytes, and the
// remote-write exporter forwards a large record's bytes with no
// compression of its own. A request with invalid series (a partial write) is
// queued as OTLP of its good series: the record never holds data the
// receiver refused.

// prwDecoders are shared by the lake loop, the tail and the exporters'
// parsers (scratch space, used by one goroutine at a time).
var prwDecoders = sync.Pool{New: func() any { return new(prwScratch) }}

type prwScratch struct {
	dec prw.Decoder
	buf []byte // the snappy-decoded body
}

// recordEnc is the body encoding of the record the consumer queues for req:
// the remote-write body as received, unless the rules re-encoded the batch
// (changed: the body is then OTLP).
func recordEnc(req *otlpreceiver.Request, changed bool) bodyEnc {
	switch {
	case changed || req.Kind != signal.KindMetrics:
	case req.RemoteWrite == 1:
		return encPRW1
	case req.RemoteWrite == 2:
		return encPRW2
	}
	return encOTLP
}

// appendRecordBody appends the record of s's request for every consumer
// (one route): encPRW1N and encPRW2N put the series count before body.
func appendRecordBody(dst []byte, s *scratch, kind signal.Kind, tenant string, body []byte) []byte {
	if s.enc != encPRW1N && s.enc != encPRW2N {
		return appendRecordTo(dst, kind, s.enc, tenant, nil, body)
	}
	dst = appendRecordTo(dst, kind, s.enc, tenant, nil, nil)
	dst = binary.AppendUvarint(dst, uint64(s.series))
	return append(dst, body...)
}

// splitCounted splits an encPRW1N or encPRW2N body into its series count and the
// request (snappy, as received).
func splitCounted(body []byte) (int, []byte, error) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n > math.MaxInt32 {
		return 0, nil, fmt.Errorf("%w: remote-write series count", errBadRecord)
	}
	return int(n), body[k:], nil
}

// decodeMetricsRecord appends a metrics record's body of encoding enc to
// dst. A remote-write body was checked by the consumer before it was
// queued; a partial error here (it cannot happen for a body the consumer
// queued) keeps the good series, as the receiver would have.
func decodeMetricsRecord(dst *signal.Metrics, enc bodyEnc, body []byte) error {
	return decodeMetricsRecordWith(dst, enc, body, nil)
}

// decodeMetricsRecordWith is decodeMetricsRecord that also hands a 1.0
// request, snappy-decoded, to learn (when not nil).
func decodeMetricsRecordWith(dst *signal.Metrics, enc bodyEnc, body []byte, learn func(req []byte)) error {
	switch enc {
	case encOTLP:
		return otlp.DecodeMetrics(dst, body)
	case encPRW1N:
		_, raw, err := splitCounted(body)
		if err != nil {
			return err
		}
		return decodeMetricsRecordWith(dst, encPRW1, raw, learn)
	case encPRW2N:
		_, raw, err := splitCounted(body)
		if err != nil {
			return err
		}
		return decodeMetricsRecord(dst, encPRW2, raw)
	case encPRW1, encPRW2:
		x := prwDecoders.Get().(*prwScratch)
		defer func() {
			if cap(x.buf) <= maxPooledBytes {
				prwDecoders.Put(x)
			}
		}()
		var err error
		if x.buf, err = prw.Unsnappy(x.buf, body); err != nil {
			return err
		}
		if enc == encPRW1 {
			_, err = x.dec.DecodeV1(dst, x.buf)
			if learn != nil {
				learn(x.buf)
			}
		} else {
			_, err = x.dec.DecodeV2(dst, x.buf)
		}
		var pe *prw.PartialError
		if errors.As(err, &pe) {
			err = nil
		}
		return err
	}
	return fmt.Errorf("%w: body encoding %d for metrics", errBadRecord, enc)
}

// otlpMetricsBody returns a metrics record's body as OTLP: the body itself,
// or a remote-write body decoded into m (reset first) and encoded into dst.
func otlpMetricsBody(dst []byte, m *signal.Metrics, enc bodyEnc, body []byte) ([]byte, error) {
	if enc == encOTLP {
		return body, nil
	}
	m.Reset()
	if err := decodeMetricsRecord(m, enc, body); err != nil {
		return nil, err
	}
	return otlp.AppendMetricsProto(dst[:0], m), nil
}

// prwParser returns the record parser of the exporter name (run by its
// Runner's goroutine only). A remote-write record goes as it is to a sender
// that takes remote write (takesPRW: the remote-write exporter forwards it
// without decoding it when it can) and as OTLP to the others.
//
// OTLP counts are integers, so a float histogram with fractional counts
// (remote write's recording rules over native histograms) has no OTLP
// form: it is dropped from the OTLP body and counted in fractional (when
// not nil), as the OpenTelemetry specification drops what a format cannot
// express; whole-number float histograms go as integer histograms.
//
// Metadata a 1.0 sender sent in requests of its own (Prometheus does) is
// learnt into fam and describes the OTLP metrics of later requests of the
// same tenant and family (prw.FamilyTable); nil fam: a table of its own.
func prwParser(name string, takesPRW bool, fractional prometheus.Counter, fam *prw.FamilyTable) func(rec []byte) (exporter.Record, error) {
	if fam == nil {
		fam = prw.NewFamilyTable(0)
	}
	var (
		m      signal.Metrics
		buf    []byte
		tenant string
		learn  = func(req []byte) { fam.LearnV1(tenant, req) }
	)
	return func(rec []byte) (exporter.Record, error) {
		r, err := parseRecord(rec)
		if err != nil {
			return exporter.Record{}, err
		}
		if !r.to(name) {
			return exporter.Record{}, exporter.ErrSkip
		}
		x := exporter.Record{Kind: r.Kind, Tenant: string(r.Tenant), Body: r.Body}
		switch {
		case r.Enc == encPRW1 && takesPRW:
			x.RemoteWrite = 1
		case r.Enc == encPRW1N && takesPRW:
			if x.Series, x.Body, err = splitCounted(r.Body); err != nil {
				return exporter.Record{}, err
			}
			x.RemoteWrite = 1
		case r.Enc == encPRW2 && takesPRW:
			x.RemoteWrite = 2
		case r.Enc == encPRW2N && takesPRW:
			if x.Series, x.Body, err = splitCounted(r.Body); err != nil {
				return exporter.Record{}, err
			}
			x.RemoteWrite = 2
		case r.Enc == encPRW1 || r.Enc == encPRW2 || r.Enc == encPRW1N || r.Enc == encPRW2N:
			m.Reset()
			tenant = x.Tenant
			if err := decodeMetricsRecordWith(&m, r.Enc, r.Body, learn); err != nil {
				return exporter.Record{}, fmt.Errorf("remote-write record: %w", err)
			}
			fam.Describe(tenant, &m, 0)
			if n := dropFractional(&m); n > 0 && fractional != nil {
				fractional.Add(float64(n))
			}
			if m.Len() == 0 {
				// Metadata without series, or only what OTLP cannot carry.
				return exporter.Record{}, exporter.ErrSkip
			}
			buf = otlp.AppendMetricsProto(buf[:0], &m)
			x.Body = buf // copied by the Runner before the next call
			if cap(buf) > maxPooledBytes {
				buf, m = nil, signal.Metrics{}
			}
		}
		return x, nil
	}
}

// dropFractional removes m's float histograms whose counts are not all
// whole numbers and returns how many it removed.
func dropFractional(m *signal.Metrics) int {
	keep := 0
	for i := range m.Len() {
		fc := m.FloatCounts[i]
		whole := true
		for _, f := range m.F64[fc.Start:fc.End] {
			whole = whole && f == math.Trunc(f)
		}
		if whole {
			m.MovePoint(keep, i)
			keep++
		}
	}
	n := m.Len() - keep
	if n > 0 {
		m.Truncate(keep)
	}
	return n
}
