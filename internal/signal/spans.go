package signal

// Spans is a batch of OTLP spans.
type Spans struct {
	Common

	Resource      []uint32
	Scope         []uint32
	TraceID       []TraceID
	SpanID        []SpanID
	ParentSpanID  []SpanID
	TraceState    []Str
	Flags         []uint32
	Name          []Str
	Kind          []int32
	StartTime     []int64
	EndTime       []int64
	Attr          []Range
	DroppedAttrs  []uint32
	Events        []Range // into Msgs: raw Span.Event messages
	DroppedEvents []uint32
	Links         []Range // into Msgs: raw Span.Link messages
	DroppedLinks  []uint32
	StatusCode    []int32
	StatusMessage []Str

	cp copier
}

// Len is the number of spans.
func (s *Spans) Len() int { return len(s.StartTime) }

// Reset empties the batch, keeping capacity.
func (s *Spans) Reset() {
	s.Common.Reset()
	s.cp.forget()
	s.Resource = s.Resource[:0]
	s.Scope = s.Scope[:0]
	s.TraceID = s.TraceID[:0]
	s.SpanID = s.SpanID[:0]
	s.ParentSpanID = s.ParentSpanID[:0]
	s.TraceState = s.TraceState[:0]
	s.Flags = s.Flags[:0]
	s.Name = s.Name[:0]
	s.Kind = s.Kind[:0]
	s.StartTime = s.StartTime[:0]
	s.EndTime = s.EndTime[:0]
	s.Attr = s.Attr[:0]
	s.DroppedAttrs = s.DroppedAttrs[:0]
	s.Events = s.Events[:0]
	s.DroppedEvents = s.DroppedEvents[:0]
	s.Links = s.Links[:0]
	s.DroppedLinks = s.DroppedLinks[:0]
	s.StatusCode = s.StatusCode[:0]
	s.StatusMessage = s.StatusMessage[:0]
}

// AppendSpan appends a span with zero values for every field and returns its
// index. Decoders fill the fields in place.
func (s *Spans) AppendSpan(resource, scope uint32) int {
	s.Resource = append(s.Resource, resource)
	s.Scope = append(s.Scope, scope)
	s.TraceID = append(s.TraceID, TraceID{})
	s.SpanID = append(s.SpanID, SpanID{})
	s.ParentSpanID = append(s.ParentSpanID, SpanID{})
	s.TraceState = append(s.TraceState, 0)
	s.Flags = append(s.Flags, 0)
	s.Name = append(s.Name, 0)
	s.Kind = append(s.Kind, 0)
	s.StartTime = append(s.StartTime, 0)
	s.EndTime = append(s.EndTime, 0)
	a := uint32(s.Attrs.Len())
	s.Attr = append(s.Attr, Range{a, a})
	s.DroppedAttrs = append(s.DroppedAttrs, 0)
	e := uint32(len(s.Msgs))
	s.Events = append(s.Events, Range{e, e})
	s.DroppedEvents = append(s.DroppedEvents, 0)
	s.Links = append(s.Links, Range{e, e})
	s.DroppedLinks = append(s.DroppedLinks, 0)
	s.StatusCode = append(s.StatusCode, 0)
	s.StatusMessage = append(s.StatusMessage, 0)
	return len(s.StartTime) - 1
}

// CopyFrom appends span i of src to s, copying what it references.
func (s *Spans) CopyFrom(src *Spans, i int) {
	s.cp.bind(&src.Common)
	cp := &s.cp
	d := &s.Common
	s.Resource = append(s.Resource, cp.resource(d, src.Resource[i]))
	s.Scope = append(s.Scope, cp.scope(d, src.Scope[i]))
	s.TraceID = append(s.TraceID, src.TraceID[i])
	s.SpanID = append(s.SpanID, src.SpanID[i])
	s.ParentSpanID = append(s.ParentSpanID, src.ParentSpanID[i])
	s.TraceState = append(s.TraceState, cp.str(d, src.TraceState[i]))
	s.Flags = append(s.Flags, src.Flags[i])
	s.Name = append(s.Name, cp.str(d, src.Name[i]))
	s.Kind = append(s.Kind, src.Kind[i])
	s.StartTime = append(s.StartTime, src.StartTime[i])
	s.EndTime = append(s.EndTime, src.EndTime[i])
	s.Attr = append(s.Attr, cp.attrs(d, src.Attr[i]))
	s.DroppedAttrs = append(s.DroppedAttrs, src.DroppedAttrs[i])
	s.Events = append(s.Events, cp.msgs(d, src.Events[i]))
	s.DroppedEvents = append(s.DroppedEvents, src.DroppedEvents[i])
	s.Links = append(s.Links, cp.msgs(d, src.Links[i]))
	s.DroppedLinks = append(s.DroppedLinks, src.DroppedLinks[i])
	s.StatusCode = append(s.StatusCode, src.StatusCode[i])
	s.StatusMessage = append(s.StatusMessage, cp.str(d, src.StatusMessage[i]))
}
