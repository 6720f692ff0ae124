package signal

// TraceID and SpanID are OTLP's identifiers; all-zero means absent.
type (
	TraceID [16]byte
	SpanID  [8]byte
)

// IsZero reports whether the id is absent.
func (t TraceID) IsZero() bool { return t == TraceID{} }

// IsZero reports whether the id is absent.
func (s SpanID) IsZero() bool { return s == SpanID{} }

// Logs is a batch of OTLP log records, one element per record in each
// per-record slice.
type Logs struct {
	Common

	Resource     []uint32 // index into Resources
	Scope        []uint32 // index into Scopes
	Time         []int64  // time_unix_nano; 0 when unset
	ObservedTime []int64  // observed_time_unix_nano; 0 when unset
	SeverityNum  []int32
	SeverityText []Str
	BodyType     []ValueType
	Body         []uint64 // encoded like Attrs.Val
	Attr         []Range  // record attributes
	DroppedAttrs []uint32
	Flags        []uint32
	TraceID      []TraceID
	SpanID       []SpanID
	EventName    []Str

	cp copier
}

// Len is the number of records.
func (l *Logs) Len() int { return len(l.Time) }

// Reset empties the batch, keeping capacity.
func (l *Logs) Reset() {
	l.Common.Reset()
	l.cp.forget()
	l.Resource = l.Resource[:0]
	l.Scope = l.Scope[:0]
	l.Time = l.Time[:0]
	l.ObservedTime = l.ObservedTime[:0]
	l.SeverityNum = l.SeverityNum[:0]
	l.SeverityText = l.SeverityText[:0]
	l.BodyType = l.BodyType[:0]
	l.Body = l.Body[:0]
	l.Attr = l.Attr[:0]
	l.DroppedAttrs = l.DroppedAttrs[:0]
	l.Flags = l.Flags[:0]
	l.TraceID = l.TraceID[:0]
	l.SpanID = l.SpanID[:0]
	l.EventName = l.EventName[:0]
}

// AppendRecord appends a record with zero values for every field and returns
// its index. Decoders fill the fields in place.
func (l *Logs) AppendRecord(resource, scope uint32) int {
	l.Resource = append(l.Resource, resource)
	l.Scope = append(l.Scope, scope)
	l.Time = append(l.Time, 0)
	l.ObservedTime = append(l.ObservedTime, 0)
	l.SeverityNum = append(l.SeverityNum, 0)
	l.SeverityText = append(l.SeverityText, 0)
	l.BodyType = append(l.BodyType, ValueEmpty)
	l.Body = append(l.Body, 0)
	a := uint32(l.Attrs.Len())
	l.Attr = append(l.Attr, Range{a, a})
	l.DroppedAttrs = append(l.DroppedAttrs, 0)
	l.Flags = append(l.Flags, 0)
	l.TraceID = append(l.TraceID, TraceID{})
	l.SpanID = append(l.SpanID, SpanID{})
	l.EventName = append(l.EventName, 0)
	return len(l.Time) - 1
}

// CopyFrom appends record i of src to l, copying its strings, attributes,
// resource and scope. Resources and scopes shared by successive records of
// the same src are copied once.
func (l *Logs) CopyFrom(src *Logs, i int) {
	l.cp.bind(&src.Common)
	cp := &l.cp
	d := &l.Common
	l.Resource = append(l.Resource, cp.resource(d, src.Resource[i]))
	l.Scope = append(l.Scope, cp.scope(d, src.Scope[i]))
	l.Time = append(l.Time, src.Time[i])
	l.ObservedTime = append(l.ObservedTime, src.ObservedTime[i])
	l.SeverityNum = append(l.SeverityNum, src.SeverityNum[i])
	l.SeverityText = append(l.SeverityText, cp.str(d, src.SeverityText[i]))
	bt, bv := src.BodyType[i], src.Body[i]
	switch bt {
	case ValueString, ValueBytes, ValueArray, ValueMap:
		bv = uint64(cp.str(d, Str(bv)))
	}
	l.BodyType = append(l.BodyType, bt)
	l.Body = append(l.Body, bv)
	l.Attr = append(l.Attr, cp.attrs(d, src.Attr[i]))
	l.DroppedAttrs = append(l.DroppedAttrs, src.DroppedAttrs[i])
	l.Flags = append(l.Flags, src.Flags[i])
	l.TraceID = append(l.TraceID, src.TraceID[i])
	l.SpanID = append(l.SpanID, src.SpanID[i])
	l.EventName = append(l.EventName, cp.str(d, src.EventName[i]))
}

// PartitionTime is the time a record is partitioned and sorted by: its own
// timestamp, or its observed time when it has none.
func (l *Logs) PartitionTime(i int) int64 {
	if t := l.Time[i]; t != 0 {
		return t
	}
	return l.ObservedTime[i]
}
