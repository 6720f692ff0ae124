package pipeline

import (
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Queue record versions. Version 1 (sessions before per-pipeline routing)
// is still read, so a queue written by an older build drains after an
// upgrade; every record is written as version 2. A reader refuses versions
// it does not know rather than guess.
const (
	recordV1 = 1
	recordV2 = 2
)

// bodyEnc says how a record's body is encoded. It is part of the record so
// that a body can be queued as it was received (remote write, the tracer's
// wire format) and decoded once, by whoever reads it.
type bodyEnc uint8

const (
	encOTLP   bodyEnc = 0 // OTLP protobuf of the record's signal
	encIOWire bodyEnc = 1 // tracer.AppendWire (kind io_events)
	// Remote write as received (kind metrics): the request, snappy block
	// encoded as the client sent it, queued as is when no rule changed it
	// (prwrecord.go).
	encPRW1 bodyEnc = 2 // prometheus.WriteRequest (remote write 1.0)
	encPRW2 bodyEnc = 3 // io.prometheus.write.v2.Request (remote write 2.0)
	// encPRW1N is encPRW1 preceded by its TimeSeries count (uvarint): a
	// request the receiver scanned (prwrecord.go), so that the
	// remote-write exporter forwards it without snappy-decoding it.
	encPRW1N bodyEnc = 4
	// encPRW2N is encPRW2 preceded by its TimeSeries count, as encPRW1N.
	encPRW2N bodyEnc = 5
)

// validEnc reports whether a record of kind may have a body encoded as enc.
func validEnc(kind signal.Kind, enc bodyEnc) bool {
	switch enc {
	case encOTLP:
		return kind != signal.KindIOEvents
	case encIOWire:
		return kind == signal.KindIOEvents
	case encPRW1, encPRW2, encPRW1N, encPRW2N:
		return kind == signal.KindMetrics
	}
	return false
}

var errBadRecord = errors.New("pipeline: bad queue record")

// record is one parsed queue record. Tenant, dests and Body alias the
// record's bytes.
type record struct {
	Kind   signal.Kind
	Enc    bodyEnc
	Tenant []byte
	// dests is the encoded destination list (see appendRecordTo); empty
	// means every consumer of the record's signal.
	dests []byte
	Body  []byte
}

// dest is the routing of a record: the names of the exporters that take it
// ("lake" for the lake). nil means every consumer of the signal.
type dest []string

// appendRecord appends a version 2 record for every consumer of kind, with
// an OTLP body (encIOWire for io_events).
func appendRecord(dst []byte, kind signal.Kind, tenant string, body []byte) []byte {
	enc := encOTLP
	if kind == signal.KindIOEvents {
		enc = encIOWire
	}
	return appendRecordTo(dst, kind, enc, tenant, nil, body)
}

// appendRecordTo appends one version 2 queue record to dst:
//
//	version uint8 = 2 | kind uint8 | enc uint8 | len(tenant) uint8 | tenant |
//	ndest uint8 | ndest × (len uint8 | name) | body
//
// Tenants are at most 64 bytes (validated by the receiver); exporter names
// are at most 255 bytes and at most 255 of them (config validation).
func appendRecordTo(dst []byte, kind signal.Kind, enc bodyEnc, tenant string, to dest, body []byte) []byte {
	dst = append(dst, recordV2, byte(kind), byte(enc), byte(len(tenant)))
	dst = append(dst, tenant...)
	dst = append(dst, byte(len(to)))
	for _, name := range to {
		dst = append(dst, byte(len(name)))
		dst = append(dst, name...)
	}
	return append(dst, body...)
}

// parseRecord splits a record of either version.
func parseRecord(rec []byte) (record, error) {
	if len(rec) < 3 {
		return record{}, fmt.Errorf("%w: %d bytes", errBadRecord, len(rec))
	}
	var r record
	r.Kind = signal.Kind(rec[1])
	if r.Kind != signal.KindLogs && r.Kind != signal.KindMetrics && r.Kind != signal.KindTraces && r.Kind != signal.KindIOEvents {
		return record{}, fmt.Errorf("%w: signal kind %d", errBadRecord, rec[1])
	}
	var p int
	switch rec[0] {
	case recordV1:
		if r.Kind == signal.KindIOEvents {
			r.Enc = encIOWire
		}
		p = 2
	case recordV2:
		if len(rec) < 4 {
			return record{}, fmt.Errorf("%w: %d bytes", errBadRecord, len(rec))
		}
		r.Enc = bodyEnc(rec[2])
		if !validEnc(r.Kind, r.Enc) {
			return record{}, fmt.Errorf("%w: body encoding %d for signal %s", errBadRecord, rec[2], r.Kind)
		}
		p = 3
	default:
		return record{}, fmt.Errorf("%w: version %d (this build reads %d and %d)", errBadRecord, rec[0], recordV1, recordV2)
	}
	n := int(rec[p])
	p++
	if n == 0 || len(rec) < p+n {
		return record{}, fmt.Errorf("%w: tenant length %d in %d bytes", errBadRecord, n, len(rec))
	}
	r.Tenant = rec[p : p+n]
	p += n
	if rec[0] == recordV2 {
		if p >= len(rec) {
			return record{}, fmt.Errorf("%w: no destination count", errBadRecord)
		}
		start := p
		nd := int(rec[p])
		p++
		for range nd {
			if p >= len(rec) || int(rec[p]) == 0 || p+1+int(rec[p]) > len(rec) {
				return record{}, fmt.Errorf("%w: destination list cut at byte %d", errBadRecord, p)
			}
			p += 1 + int(rec[p])
		}
		if nd > 0 {
			r.dests = rec[start:p]
		}
	}
	r.Body = rec[p:]
	return r, nil
}

// to reports whether the record goes to the consumer named name ("lake"
// or an exporter's name).
func (r *record) to(name string) bool {
	if len(r.dests) == 0 {
		return true
	}
	b := r.dests[1:]
	for len(b) > 0 {
		n := int(b[0])
		if string(b[1:1+n]) == name {
			return true
		}
		b = b[1+n:]
	}
	return false
}

// destinations returns the record's destination names (nil: everyone).
func (r *record) destinations() dest {
	if len(r.dests) == 0 {
		return nil
	}
	var d dest
	b := r.dests[1:]
	for len(b) > 0 {
		n := int(b[0])
		d = append(d, string(b[1:1+n]))
		b = b[1+n:]
	}
	return d
}

// lakeDest is the lake's name in a record's destination list: the name
// pipelines use for it.
const lakeDest = config.ExporterLake
