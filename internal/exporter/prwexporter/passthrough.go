package prwexporter

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Pass-through. A remote-write record (exporter.Record.RemoteWrite) holds
// the request as the receiver got it, snappy block encoded, checked (no
// invalid series: the
// receiver queues a partial write as OTLP). Sent to an exporter of the
// same protocol version, it needs no decode and no conversion; with one
// lane and replicated (or one endpoint):
//
//   - 1.0: the bodies of consecutive records of one tenant are
//     concatenated (a protobuf message's repeated fields merge, so the
//     concatenation is one WriteRequest holding every series and metadata
//     of each) up to maxRawBytes snappy-decoded, as their snappy blocks
//     joined (s2.ConcatBlocks: no decode, no encode, a copy; see
//     sendMerged); a record of maxRawBytes or more, or one alone in its
//     request, goes with its bytes as received. A record that carries the
//     receiver's series count (Record.Series) is not even snappy-decoded:
//     its length header says its size.
//   - 2.0: each record is one request as received, not even
//     snappy-decoded when it carries the receiver's series count (a
//     scanned request) and is large; small scanned records are merged,
//     their symbol tables appended and their references shifted
//     (mergev2.go); an endpoint that answered 415 gets it converted to
//     1.0.
//
// With lanes (Config.Concurrency above 1) or in shard mode, records of
// either version are split by series without decoding, copied series by
// series into one request per lane and endpoint (split.go); a record of
// the other protocol version is decoded (the convert path).

// maxRawBytes bounds one pass-through 1.0 request of concatenated
// records, snappy-decoded; a record of this size or more goes alone, as
// its bytes were received. Large records are joined too (four requests
// of 1,500 series in one): an HTTP request of the exporter's costs more
// than copying the compressed bytes.
//
// A 2.0 record of minAloneBytes or more goes alone as received: merging
// 2.0 records decodes them and compresses the request again (mergev2.go),
// which costs more than a request of its own (about 1,000 series and up).
const (
	maxRawBytes   = 1 << 20
	minAloneBytes = 64 << 10
)

// passThrough reports whether r goes to the endpoints as it is.
func (e *Exporter) passThrough(r *exporter.Record) bool {
	if r.Kind != signal.KindMetrics || r.RemoteWrite == 0 {
		return false
	}
	// send_metadata: false (NoMetadata) leaves metadata out, which the
	// records may hold as the sender wrote them: a 1.0 record the
	// receiver's scan counted (Series > 0) holds float samples only, any
	// other 1.0 record and a 2.0 record may carry metadata, so they take
	// the convert path, which leaves it out.
	if r.RemoteWrite == 1 {
		return e.cfg.Protocol != "2.0" && (!e.cfg.NoMetadata || r.Series > 0)
	}
	return r.RemoteWrite == 2 && e.cfg.Protocol == "2.0" && !e.cfg.NoMetadata
}

// splits reports whether pass-through records are split by series
// (split.go): lanes, or shard mode.
func (e *Exporter) splits() bool { return e.lanes() > 1 || e.sharding() }

// sendRaw sends recs, remote-write records of one version and tenant for
// which passThrough holds, to every endpoint. A record's body is the
// request as the receiver got it, snappy block encoded.
func (e *Exporter) sendRaw(ctx context.Context, tenant string, recs []exporter.Record) error {
	if e.splits() {
		return e.sendSplitRecs(ctx, tenant, recs)
	}
	for i := 0; i < len(recs); {
		j := i + 1
		if recs[i].RemoteWrite == 1 {
			n, err := s2.DecodedLen(recs[i].Body)
			switch {
			case err != nil:
				e.badBodies.Add(1) // the receiver checked it: a damaged queue
				i = j
				continue
			case n < maxRawBytes:
				// One request of several records.
				if j, err = e.sendMerged(ctx, tenant, recs, i); err != nil {
					return err
				}
				i = j
				continue
			case recs[i].Series > 0:
				// Large enough to go alone, and the receiver counted its
				// series: its bytes as received, not even snappy-decoded.
				body := recs[i].Body
				err := e.replicate(ctx, tenant, recs[i].Series, rawSource{snappy: body},
					func() ([]byte, error) { return nil, errors.New("a 1.0 request for a 2.0 endpoint") }, // passThrough: never
					func() ([]byte, error) { return body, nil })
				if err != nil {
					return err
				}
				i = j
				continue
			}
		}
		if recs[i].RemoteWrite == 2 && recs[i].Series > 0 {
			// Small ones: one request of several (mergev2.go).
			if j, err := e.sendMergedV2(ctx, tenant, recs, i); j > i || err != nil {
				if err != nil {
					return err
				}
				i = j
				continue
			}
			// The receiver scanned it and counted its series: its bytes
			// as received, snappy-decoded only for an endpoint that fell
			// back to 1.0.
			body := recs[i].Body
			err := e.replicate(ctx, tenant, recs[i].Series, rawSource{snappy: body, v2: true},
				func() ([]byte, error) { return body, nil },
				func() ([]byte, error) {
					var err error
					if e.unsnap, err = prw.Unsnappy(e.unsnap, body); err != nil {
						e.badBodies.Add(1) // the receiver checked it: a damaged queue
						return nil, err
					}
					return e.v2ToV1(e.unsnap)
				})
			if err != nil {
				return err
			}
			i = j
			continue
		}
		var err error
		if e.unsnap, err = prw.Unsnappy(e.unsnap, recs[i].Body); err != nil {
			e.badBodies.Add(1) // the receiver checked it: a damaged queue
			i = j
			continue
		}
		if recs[i].RemoteWrite == 2 {
			body, plain := recs[i].Body, e.unsnap
			err := e.replicate(ctx, tenant, countSeries(plain, 5), rawSource{plain: plain, v2: true},
				func() ([]byte, error) { return body, nil },
				func() ([]byte, error) { return e.v2ToV1(plain) })
			if err != nil {
				return err
			}
			i = j
			continue
		}
		// Large enough to go alone: its bytes as received, no
		// compression of ours.
		body := recs[i].Body
		err = e.replicate(ctx, tenant, countSeries(e.unsnap, 1), rawSource{snappy: body},
			func() ([]byte, error) { return nil, errors.New("a 1.0 request for a 2.0 endpoint") }, // passThrough: never
			func() ([]byte, error) { return body, nil })
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}

// sendMerged sends the 1.0 records from recs[i] on (recs[i] is under
// maxRawBytes), up to maxRawBytes decoded, as one request, and returns the index
// of the first record it did not take. Their snappy blocks are
// concatenated, not decoded and compressed again: a snappy copy refers
// back from the position it is decoded at, so the blocks of several bodies
// are one block of the bodies concatenated, and concatenated WriteRequest
// messages are one WriteRequest (repeated fields merge). A record is
// decoded only to count its series when the receiver did not count them
// (Record.Series), which also checks it.
func (e *Exporter) sendMerged(ctx context.Context, tenant string, recs []exporter.Record, i int) (int, error) {
	e.blocks = e.blocks[:0]
	size, series := 0, 0
	j := i
	for ; j < len(recs) && size < maxRawBytes; j++ {
		n, err := s2.DecodedLen(recs[j].Body)
		if err != nil {
			e.badBodies.Add(1)
			continue
		}
		if n >= maxRawBytes || (len(e.blocks) > 0 && size+n > maxRawBytes) {
			break // goes next, on its own or in the next request
		}
		c := recs[j].Series
		if c == 0 {
			if e.unsnap, err = prw.Unsnappy(e.unsnap, recs[j].Body); err != nil {
				e.badBodies.Add(1)
				continue
			}
			c = countSeries(e.unsnap, 1)
		}
		e.blocks = append(e.blocks, recs[j].Body)
		size += n
		series += c
	}
	if len(e.blocks) == 0 {
		return j, nil
	}
	payload := e.blocks[0] // one record: its bytes as received
	if len(e.blocks) > 1 {
		var err error
		if payload, err = s2.ConcatBlocks(e.joined[:0], e.blocks...); err != nil {
			e.badBodies.Add(1) // DecodedLen read every header: cannot happen
			return j, nil
		}
		e.joined = payload
	}
	err := e.replicate(ctx, tenant, series, rawSource{snappy: payload},
		func() ([]byte, error) { return nil, errors.New("a 1.0 request for a 2.0 endpoint") }, // passThrough: never
		func() ([]byte, error) { return payload, nil })
	return j, err
}

// replicate sends one request of n series to every endpoint in parallel;
// v2f and v1f make its payloads, each at most once. An endpoint that
// refuses the request as too large (413) gets src, what the request was
// made of, again in parts (resendInParts).
func (e *Exporter) replicate(ctx context.Context, tenant string, n int, src rawSource, v2f, v1f func() ([]byte, error)) error {
	v2f, v1f = sync.OnceValues(v2f), sync.OnceValues(v1f)
	errs := make([]error, len(e.eps))
	var wg sync.WaitGroup
	for k := range e.eps {
		if e.others(k) {
			continue
		}
		wg.Go(func() {
			sent, err := e.deliver(ctx, k, tenant, v2f, v1f)
			if errors.Is(err, sending.ErrTooLarge) {
				err = e.resendInParts(ctx, k, tenant, src, err)
			}
			errs[k] = err
			if sent {
				e.sentSeries.Add(uint64(n))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rawSource is a pass-through request as its records hold it: snappy
// (snappy) or snappy-decoded (plain) remote write of version 2 (v2) or
// 1. The buffers must not change until the request is delivered.
type rawSource struct {
	snappy, plain []byte
	v2            bool
}

// resendInParts sends src, a pass-through request endpoint k refused as
// too large (err), as the convert path sends remote-write records: decoded
// and converted, in halves of its series (sendHalves), each halved again
// while the endpoint refuses it. It works on its own batch and converter,
// as several endpoints may do so at once; a 413 is rare, and the convert
// path keeps what a series holds.
func (e *Exporter) resendInParts(ctx context.Context, k int, tenant string, src rawSource, err error) error {
	plain := src.plain
	if plain == nil {
		var uerr error
		if plain, uerr = prw.Unsnappy(nil, src.snappy); uerr != nil {
			e.badBodies.Add(1) // the receiver checked it: a damaged queue
			e.eps[k].DropTooLarge(err, "a request that does not decode")
			return nil
		}
	}
	var (
		m  signal.Metrics
		d  prw.Decoder
		cv = converter{fromRW: true}
	)
	var derr error
	if src.v2 {
		_, derr = d.DecodeV2(&m, plain)
	} else {
		_, derr = d.DecodeV1(&m, plain)
		e.fam.LearnV1(tenant, plain)
	}
	var pe *prw.PartialError
	if derr != nil && !errors.As(derr, &pe) {
		e.badBodies.Add(1)
		e.eps[k].DropTooLarge(err, "a request that does not decode")
		return nil
	}
	if !e.cfg.NoMetadata {
		e.fam.Describe(tenant, &m, 0)
	}
	cv.add(&m, 0)
	cv.inTimeOrder()
	e.droppedPoints.Add(cv.dropped)
	return e.sendHalves(ctx, k, tenant, cv.series, cv.meta, err)
}

// v2ToV1 converts a 2.0 request to a snappy-encoded 1.0 one (an endpoint
// that fell back to 1.0), with the exporter's send_native_histograms and
// send_metadata: a native histogram it cannot carry is dropped and counted.
func (e *Exporter) v2ToV1(body []byte) ([]byte, error) {
	var (
		m  signal.Metrics
		d  prw.Decoder
		cv = converter{fromRW: true}
	)
	_, err := d.DecodeV2(&m, body)
	var pe *prw.PartialError
	if err != nil && !errors.As(err, &pe) {
		return nil, err
	}
	cv.add(&m, 0)
	b, _, dropped, err := encodeV1With(cv.series, cv.meta, e.encodeOpts())
	e.droppedPoints.Add(uint64(dropped))
	return b, err
}

// countSeries counts the top-level fields number num (the time series)
// of a protobuf message, without decoding them; it stops at the first
// malformed field.
func countSeries(b []byte, num protowire.Number) int {
	n := 0
	for len(b) > 0 {
		f, err := nextField(b)
		if err != nil {
			break
		}
		b = b[f.end:]
		if f.num == num {
			n++
		}
	}
	return n
}

func (e *Exporter) sharding() bool { return e.cfg.Shard && len(e.eps) > 1 }

func cmpLabel(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) }
