package lake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	tenantpkg "github.com/sluice-dev/sluice/internal/tenant"
)

// QuarantineDir is the top directory of quarantined records in a lake:
// records the lake writer could not write (they failed to encode, or to
// decode), kept instead of blocking the lake. Its name starts with "_",
// so Hive readers, globs over the tables and the orphan sweep skip it.
//
// Layout: QuarantineDir/<table>/<tenant>/<position>.binpb holds the
// record's original OTLP export request (protobuf, as received, so
// `sluice ingest` can replay it), and <position>.json beside it its
// QuarantineEntry, written second: an entry names a complete body.
// <position> is the record's queue position, 20 digits, so a record
// quarantined again after a replay lands on the same names.
const QuarantineDir = "_quarantine"

// QuarantineEntry describes one quarantined record.
type QuarantineEntry struct {
	Table    string    `json:"table"`    // logs, metrics, traces, or "unknown" for a record that did not parse
	Tenant   string    `json:"tenant"`   // as in the queue record; "_invalid" when not a valid tenant
	Position uint64    `json:"position"` // queue position after the record
	Records  int       `json:"records"`  // records (log records, data points, spans) in it; 0 when it did not decode
	Bytes    int       `json:"bytes"`    // size of the body
	Time     time.Time `json:"time"`     // when it was quarantined
	Reason   string    `json:"reason"`   // the error that stopped it
	Body     string    `json:"body"`     // path of the .binpb, relative to the lake root
}

// quarantineBase is the path of an entry without its extension.
func quarantineBase(table, tenant string, pos uint64) string {
	if !tenantpkg.Valid(tenant) {
		tenant = "_invalid"
	}
	switch table {
	case TableLogs, TableMetrics, TableTraces:
	default:
		table = "unknown"
	}
	return fmt.Sprintf("%s/%s/%s/%020d", QuarantineDir, table, tenant, pos)
}

// WriteQuarantine stores body and its entry (whose Table, Tenant and
// Position name the files; Body and Bytes are filled in) in store, body
// first. Writing the same position again replaces both.
func WriteQuarantine(store Store, e QuarantineEntry, body []byte) (QuarantineEntry, error) {
	base := quarantineBase(e.Table, e.Tenant, e.Position)
	if !tenantpkg.Valid(e.Tenant) {
		e.Tenant = "_invalid"
	}
	e.Body, e.Bytes = base+".binpb", len(body)
	if err := putQuarantineObject(store, e.Body, body); err != nil {
		return e, err
	}
	js, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return e, err
	}
	return e, putQuarantineObject(store, base+".json", append(js, '\n'))
}

func putQuarantineObject(store Store, p string, b []byte) error {
	w, err := store.Create(p)
	if err != nil {
		return fmt.Errorf("quarantine %q: %w", p, err)
	}
	if _, err := w.Write(b); err != nil {
		_ = w.Abort()
		return fmt.Errorf("quarantine %q: %w", p, err)
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("quarantine %q: %w", p, err)
	}
	return nil
}

// ErrBadQuarantineEntry is returned for entry files that do not parse.
var ErrBadQuarantineEntry = errors.New("lake: bad quarantine entry")

// ParseQuarantineEntry parses an entry file.
func ParseQuarantineEntry(b []byte) (QuarantineEntry, error) {
	var e QuarantineEntry
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("%w: %v", ErrBadQuarantineEntry, err)
	}
	if dec.More() {
		return e, fmt.Errorf("%w: data after the entry", ErrBadQuarantineEntry)
	}
	if e.Table == "" || e.Body == "" || !strings.HasPrefix(e.Body, QuarantineDir+"/") || strings.Contains(e.Body, "..") {
		return e, fmt.Errorf("%w: missing table or body path", ErrBadQuarantineEntry)
	}
	return e, nil
}

// ListQuarantine returns the entries in store, in path order (table,
// tenant, position). An entry that cannot be read or parsed is returned
// with its path in Body and the problem in Reason, not skipped.
func ListQuarantine(store Store) ([]QuarantineEntry, error) {
	var paths []string
	err := store.Walk(QuarantineDir+"/", func(p string, _ int64) error {
		if strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]QuarantineEntry, 0, len(paths))
	for _, p := range paths {
		e, err := readQuarantineEntry(store, p)
		if err != nil {
			e = QuarantineEntry{Table: "?", Body: p, Reason: err.Error()}
		}
		out = append(out, e)
	}
	return out, nil
}

func readQuarantineEntry(store Store, p string) (QuarantineEntry, error) {
	r, err := store.Open(p)
	if err != nil {
		return QuarantineEntry{}, err
	}
	defer r.Close()
	if r.Size() > 1<<20 {
		return QuarantineEntry{}, fmt.Errorf("%w: %d bytes", ErrBadQuarantineEntry, r.Size())
	}
	b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
	if err != nil {
		return QuarantineEntry{}, err
	}
	return ParseQuarantineEntry(b)
}
