package prwexporter

import (
	"context"
	"errors"
	"sync"

	"github.com/klauspost/compress/s2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Pass-through. A remote-write record (exporter.Record.RemoteWrite) holds
// the request as the receiver got it, checked (no invalid series: the
// receiver queues a partial write as OTLP). Sent to an exporter of the
// same protocol version that replicates (or has one endpoint), it needs
// no decode and no conversion:
//
//   - 1.0: the bodies of consecutive records of one tenant are
//     concatenated (a protobuf message's repeated fields merge, so the
//     concatenation is one WriteRequest holding every series and metadata
//     of each) up to maxRawBytes, and snappy-encoded once.
//   - 2.0: each record is one request (merging needs the symbol tables
//     rewritten); an endpoint that answered 415 gets it converted to 1.0.
//
// Sharding needs each series' labels, so shard mode decodes (the convert
// path), as do records of the other protocol version.

// maxRawBytes bounds one pass-through 1.0 request, snappy-decoded; a
// record larger than that goes alone.
const maxRawBytes = 1 << 20

// passThrough reports whether r goes to the endpoints as it is.
func (e *Exporter) passThrough(r *exporter.Record) bool {
	if r.Kind != signal.KindMetrics || r.RemoteWrite == 0 || e.cfg.Shard && len(e.eps) > 1 {
		return false
	}
	if r.RemoteWrite == 1 {
		return e.cfg.Protocol != "2.0"
	}
	return r.RemoteWrite == 2 && e.cfg.Protocol == "2.0"
}

// sendRaw sends recs, remote-write records of one version and tenant for
// which passThrough holds, to every endpoint.
func (e *Exporter) sendRaw(ctx context.Context, tenant string, recs []exporter.Record) error {
	for i := 0; i < len(recs); {
		j := i + 1
		if recs[i].RemoteWrite == 2 {
			body := recs[i].Body
			err := e.replicate(ctx, tenant, countSeries(body, 5),
				func() ([]byte, error) { return s2.EncodeSnappy(nil, body), nil },
				func() ([]byte, error) { return v2ToV1(body) })
			if err != nil {
				return err
			}
			i = j
			continue
		}
		e.raw = append(e.raw[:0], recs[i].Body...)
		for ; j < len(recs) && len(e.raw)+len(recs[j].Body) <= maxRawBytes; j++ {
			e.raw = append(e.raw, recs[j].Body...)
		}
		payload := s2.EncodeSnappy(nil, e.raw)
		err := e.replicate(ctx, tenant, countSeries(e.raw, 1),
			func() ([]byte, error) { return nil, errors.New("a 1.0 request for a 2.0 endpoint") }, // passThrough: never
			func() ([]byte, error) { return payload, nil })
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}

// replicate sends one request of n series to every endpoint in parallel;
// v2f and v1f make its payloads, each at most once.
func (e *Exporter) replicate(ctx context.Context, tenant string, n int, v2f, v1f func() ([]byte, error)) error {
	v2f, v1f = sync.OnceValues(v2f), sync.OnceValues(v1f)
	errs := make([]error, len(e.eps))
	var wg sync.WaitGroup
	for k := range e.eps {
		wg.Go(func() {
			sent, err := e.deliver(ctx, k, tenant, v2f, v1f)
			errs[k] = err
			if sent {
				e.sentSeries.Add(uint64(n))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// v2ToV1 converts a 2.0 request to a snappy-encoded 1.0 one (an endpoint
// that fell back to 1.0).
func v2ToV1(body []byte) ([]byte, error) {
	var (
		m  signal.Metrics
		d  prw.Decoder
		cv converter
	)
	_, err := d.DecodeV2(&m, body)
	var pe *prw.PartialError
	if err != nil && !errors.As(err, &pe) {
		return nil, err
	}
	cv.add(&m, 0)
	return encodeV1(cv.series)
}

// countSeries counts the top-level fields number field (the time series)
// of a protobuf message, without decoding them; it stops at the first
// malformed field.
func countSeries(b []byte, field protowire.Number) int {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			break
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(num, typ, b)
		if l < 0 {
			break
		}
		b = b[l:]
		if num == field {
			n++
		}
	}
	return n
}
