package otlp

import (
	"github.com/sluice-dev/sluice/internal/signal"
)

var (
	schemaSpan = newSchema("",
		1, wtLen, "trace_id", 2, wtLen, "span_id", 3, wtLen, "trace_state", 4, wtLen, "parent_span_id",
		5, wtLen, "name", 6, wtVarint, "kind", 7, wtI64, "start_time_unix_nano", 8, wtI64, "end_time_unix_nano",
		9, wtLen, "attributes", 10, wtVarint, "dropped_attributes_count", 11, wtLen, "events",
		12, wtVarint, "dropped_events_count", 13, wtLen, "links", 14, wtVarint, "dropped_links_count",
		15, wtLen, "status", 16, wtI32, "flags")
	schemaStatus = newSchema("status", 2, wtLen, "message", 3, wtVarint, "code")
)

// DecodeTraces appends the spans of the ExportTraceServiceRequest pb to dst.
// Events and links are kept as raw messages in Msgs. pb is copied into dst's
// arena once. On error dst is left as it was.
func DecodeTraces(dst *signal.Spans, pb []byte) error {
	if err := arenaRoom(&dst.Common, len(pb)); err != nil {
		return err
	}
	m, n := markCommon(&dst.Common), dst.Len()
	base := len(dst.Buf)
	dst.Buf = append(dst.Buf, pb...)
	d := decoder{c: &dst.Common}
	err := d.request(dst.Buf, base, &tracesNames, func(b []byte, i int, res uint32) error {
		return d.scopeSpans(dst, b, i, res)
	})
	if err != nil {
		m.restore(&dst.Common)
		truncateSpans(dst, n)
		return wrongKind(err, pb, signal.KindTraces)
	}
	return nil
}

func (d *decoder) scopeSpans(dst *signal.Spans, b []byte, i int, res uint32) error {
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
			return at(posErr(e), "spans[%d]", k)
		}
		if err = d.span(dst, b[:e], s, res, sc); err != nil {
			return at(err, "spans[%d]", k)
		}
		k++
		i = e
	}
	return nil
}

func (d *decoder) span(dst *signal.Spans, b []byte, i int, res, scope uint32) error {
	start := i
	p := dst.AppendSpan(res, scope)
	na, ne, nl := 0, 0, 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("span", j)
		}
		var err error
		var v uint64
		switch tag {
		case 1<<3 | wtLen:
			var s int
			if s, i, err = idField(b, j, tag, schemaSpan, 16); err != nil {
				return err
			}
			copy(dst.TraceID[p][:], b[s:i])
		case 2<<3 | wtLen, 4<<3 | wtLen:
			var s int
			if s, i, err = idField(b, j, tag, schemaSpan, 8); err != nil {
				return err
			}
			if tag>>3 == 2 {
				copy(dst.SpanID[p][:], b[s:i])
			} else {
				copy(dst.ParentSpanID[p][:], b[s:i])
			}
		case 3<<3 | wtLen, 5<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				i = e
				break
			}
			var str signal.Str
			if str, err = d.str(b, s, e, schemaSpan.field(tag>>3)); err != nil {
				return err
			}
			if tag>>3 == 3 {
				dst.TraceState[p] = str
			} else {
				dst.Name[p] = str
			}
			i = e
		case 6<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.Kind[p] = int32(v)
		case 7<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.StartTime[p] = int64(v)
		case 8<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.EndTime[p] = int64(v)
		case 9<<3 | wtLen:
			if i, err = d.attr(b, j, ctxRecord, na); err != nil {
				return err
			}
			na++
		case 10<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.DroppedAttrs[p] = uint32(v)
		case 11<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				i = e
				break
			}
			if err = d.checkEvent(b[:e], s); err != nil {
				return at(err, "events[%d]", ne)
			}
			dst.Msgs = append(dst.Msgs, signal.MakeStr(s, e-s))
			ne++
			i = e
		case 12<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.DroppedEvents[p] = uint32(v)
		case 13<<3 | wtLen:
			// Links go to Msgs after the events, in a second pass, so that
			// each keeps one contiguous range even if they interleave.
			nl++
			_, i = lenField(b, j)
		case 14<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.DroppedLinks[p] = uint32(v)
		case 15<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				i = e
				break
			}
			if err = d.status(dst, b[:e], s, p); err != nil {
				return err
			}
			i = e
		case 16<<3 | wtI32:
			var f uint32
			f, i = fixed32(b, j)
			dst.Flags[p] = f
		default:
			if i, err = schemaSpan.skip(b, j, tag); err != nil {
				return err
			}
		}
		if i < 0 {
			return schemaSpan.truncErr(tag, i)
		}
	}
	dst.Attr[p].End = uint32(d.c.Attrs.Len())
	dst.Events[p].End = uint32(len(d.c.Msgs))
	dst.Links[p] = signal.Range{Start: uint32(len(d.c.Msgs)), End: uint32(len(d.c.Msgs))}
	for k, i := 0, start; k < nl; k++ {
		s, e, after := next(b, i, 13<<3|wtLen)
		if err := d.checkLink(b[:e], s); err != nil {
			return at(err, "links[%d]", k)
		}
		dst.Msgs = append(dst.Msgs, signal.MakeStr(s, e-s))
		i = after
	}
	dst.Links[p].End = uint32(len(d.c.Msgs))
	return nil
}

func (d *decoder) status(dst *signal.Spans, b []byte, i int, p int) error {
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("status", j)
		}
		var err error
		switch tag {
		case 2<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return schemaStatus.truncErr(tag, e)
			}
			if dst.StatusMessage[p], err = d.str(b, s, e, "status: message"); err != nil {
				return err
			}
			i = e
		case 3<<3 | wtVarint:
			var v uint64
			if v, i = uvarint(b, j); i < 0 {
				return schemaStatus.truncErr(tag, i)
			}
			dst.StatusCode[p] = int32(v)
		default:
			// Field 1 is the deprecated code, skipped like any unknown.
			if i, err = schemaStatus.skip(b, j, tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// truncateSpans cuts every per-span slice back to n spans.
func truncateSpans(s *signal.Spans, n int) {
	s.Resource = s.Resource[:n]
	s.Scope = s.Scope[:n]
	s.TraceID = s.TraceID[:n]
	s.SpanID = s.SpanID[:n]
	s.ParentSpanID = s.ParentSpanID[:n]
	s.TraceState = s.TraceState[:n]
	s.Flags = s.Flags[:n]
	s.Name = s.Name[:n]
	s.Kind = s.Kind[:n]
	s.StartTime = s.StartTime[:n]
	s.EndTime = s.EndTime[:n]
	s.Attr = s.Attr[:n]
	s.DroppedAttrs = s.DroppedAttrs[:n]
	s.Events = s.Events[:n]
	s.DroppedEvents = s.DroppedEvents[:n]
	s.Links = s.Links[:n]
	s.DroppedLinks = s.DroppedLinks[:n]
	s.StatusCode = s.StatusCode[:n]
	s.StatusMessage = s.StatusMessage[:n]
}
