package otlp

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/signal"
)

var schemaLogRecord = newSchema("",
	1, wtI64, "time_unix_nano", 11, wtI64, "observed_time_unix_nano",
	2, wtVarint, "severity_number", 3, wtLen, "severity_text", 5, wtLen, "body",
	6, wtLen, "attributes", 7, wtVarint, "dropped_attributes_count", 8, wtI32, "flags",
	9, wtLen, "trace_id", 10, wtLen, "span_id", 12, wtLen, "event_name")

// DecodeLogs appends the records of the ExportLogsServiceRequest pb to dst.
// pb is copied into dst's arena once, so the caller may reuse it at once. On
// error dst is left exactly as it was.
func DecodeLogs(dst *signal.Logs, pb []byte) error {
	if err := arenaRoom(&dst.Common, len(pb)); err != nil {
		return err
	}
	m, n := markCommon(&dst.Common), dst.Len()
	base := len(dst.Buf)
	dst.Buf = append(dst.Buf, pb...)
	d := decoder{c: &dst.Common}
	b := dst.Buf
	err := d.request(b, base, &logsNames, func(b []byte, i int, res uint32) error {
		return d.scopeLogs(dst, b, i, res)
	})
	if err != nil {
		m.restore(&dst.Common)
		truncateLogs(dst, n)
		return wrongKind(err, pb, signal.KindLogs)
	}
	return nil
}

func (d *decoder) scopeLogs(dst *signal.Logs, b []byte, i int, res uint32) error {
	sc := d.beginScope()
	for k := 0; i < len(b); {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("", j)
		}
		var err error
		if tag != 2<<3|wtLen {
			if i, err = d.scopeField(b, j, tag, sc); err != nil {
				return err
			}
			continue
		}
		s, e := lenField(b, j)
		if e < 0 {
			return at(posErr(e), "log_records[%d]", k)
		}
		if err = d.logRecord(dst, b[:e], s, res, sc); err != nil {
			return at(err, "log_records[%d]", k)
		}
		k++
		i = e
	}
	return nil
}

func (d *decoder) logRecord(dst *signal.Logs, b []byte, i int, res, scope uint32) error {
	var (
		t, obs             uint64
		sev                int32
		sevText, eventName signal.Str
		bodyType           signal.ValueType
		body               uint64
		dropped, flags     uint32
		tid                signal.TraceID
		sid                signal.SpanID
	)
	attrStart := uint32(d.c.Attrs.Len())
	n := 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("log_record", j)
		}
		var err error
		switch tag {
		case 1<<3 | wtI64:
			t, i = fixed64(b, j)
		case 11<<3 | wtI64:
			obs, i = fixed64(b, j)
		case 2<<3 | wtVarint:
			var v uint64
			v, i = uvarint(b, j)
			sev = int32(v)
		case 3<<3 | wtLen, 12<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				i = e
				break
			}
			var str signal.Str
			if str, err = d.str(b, s, e, schemaLogRecord.field(tag>>3)); err != nil {
				return err
			}
			if tag == 3<<3|wtLen {
				sevText = str
			} else {
				eventName = str
			}
			i = e
		case 5<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				i = e
				break
			}
			if bodyType, body, err = d.anyValue(b[:e], s, 0); err != nil {
				return fmt.Errorf("body: %w", err)
			}
			i = e
		case 6<<3 | wtLen:
			if i, err = d.attr(b, j, ctxRecord, n); err != nil {
				return err
			}
			n++
		case 7<<3 | wtVarint:
			var v uint64
			v, i = uvarint(b, j)
			dropped = uint32(v)
		case 8<<3 | wtI32:
			flags, i = fixed32(b, j)
		case 9<<3 | wtLen:
			var s int
			if s, i, err = idField(b, j, tag, schemaLogRecord, 16); err != nil {
				return err
			}
			copy(tid[:], b[s:i])
		case 10<<3 | wtLen:
			var s int
			if s, i, err = idField(b, j, tag, schemaLogRecord, 8); err != nil {
				return err
			}
			copy(sid[:], b[s:i])
		default:
			if i, err = schemaLogRecord.skip(b, j, tag); err != nil {
				return err
			}
		}
		if i < 0 {
			return schemaLogRecord.truncErr(tag, i)
		}
	}
	dst.Resource = append(dst.Resource, res)
	dst.Scope = append(dst.Scope, scope)
	dst.Time = append(dst.Time, int64(t))
	dst.ObservedTime = append(dst.ObservedTime, int64(obs))
	dst.SeverityNum = append(dst.SeverityNum, sev)
	dst.SeverityText = append(dst.SeverityText, sevText)
	dst.BodyType = append(dst.BodyType, bodyType)
	dst.Body = append(dst.Body, body)
	dst.Attr = append(dst.Attr, signal.Range{Start: attrStart, End: uint32(d.c.Attrs.Len())})
	dst.DroppedAttrs = append(dst.DroppedAttrs, dropped)
	dst.Flags = append(dst.Flags, flags)
	dst.TraceID = append(dst.TraceID, tid)
	dst.SpanID = append(dst.SpanID, sid)
	dst.EventName = append(dst.EventName, eventName)
	return nil
}

// truncateLogs cuts every per-record slice back to n records.
func truncateLogs(l *signal.Logs, n int) {
	l.Resource = l.Resource[:n]
	l.Scope = l.Scope[:n]
	l.Time = l.Time[:n]
	l.ObservedTime = l.ObservedTime[:n]
	l.SeverityNum = l.SeverityNum[:n]
	l.SeverityText = l.SeverityText[:n]
	l.BodyType = l.BodyType[:n]
	l.Body = l.Body[:n]
	l.Attr = l.Attr[:n]
	l.DroppedAttrs = l.DroppedAttrs[:n]
	l.Flags = l.Flags[:n]
	l.TraceID = l.TraceID[:n]
	l.SpanID = l.SpanID[:n]
	l.EventName = l.EventName[:n]
}
