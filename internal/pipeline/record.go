package pipeline

import (
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/signal"
)

// recordVersion is the first byte of every queue record the pipeline
// writes. A reader refuses versions it does not know rather than guess.
const recordVersion = 1

// recordHeaderLen is version, kind and tenant length.
const recordHeaderLen = 3

var errBadRecord = errors.New("pipeline: bad queue record")

// appendRecord appends one queue record to dst:
//
//	version uint8 = 1 | kind uint8 | len(tenant) uint8 | tenant | OTLP protobuf body
//
// Tenants are at most 64 bytes (validated by the receiver).
func appendRecord(dst []byte, kind signal.Kind, tenant string, body []byte) []byte {
	dst = append(dst, recordVersion, byte(kind), byte(len(tenant)))
	dst = append(dst, tenant...)
	return append(dst, body...)
}

// parseRecord splits a record; tenant and body alias rec.
func parseRecord(rec []byte) (kind signal.Kind, tenant, body []byte, err error) {
	if len(rec) < recordHeaderLen {
		return 0, nil, nil, fmt.Errorf("%w: %d bytes", errBadRecord, len(rec))
	}
	if rec[0] != recordVersion {
		return 0, nil, nil, fmt.Errorf("%w: version %d (this build reads %d)", errBadRecord, rec[0], recordVersion)
	}
	kind = signal.Kind(rec[1])
	if kind != signal.KindLogs && kind != signal.KindMetrics && kind != signal.KindTraces && kind != signal.KindIOEvents {
		return 0, nil, nil, fmt.Errorf("%w: signal kind %d", errBadRecord, rec[1])
	}
	n := int(rec[2])
	if n == 0 || len(rec) < recordHeaderLen+n {
		return 0, nil, nil, fmt.Errorf("%w: tenant length %d in %d bytes", errBadRecord, n, len(rec))
	}
	return kind, rec[recordHeaderLen : recordHeaderLen+n], rec[recordHeaderLen+n:], nil
}
