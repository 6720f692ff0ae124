package otlp

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Attribute list contexts, each with its own table of key predictions.
const (
	ctxResource = iota
	ctxScope
	ctxRecord
	ctxOther
	numCtx
)

// Records of one stream repeat their keys in much the same order, so each
// key is predicted from the key before it in its list; a byte compare with
// the prediction replaces most map lookups and every UTF-8 check of a known
// key. Keying by the previous key rather than the position keeps the
// predictions right when an optional attribute comes and goes.
const hintSlots = 256

// decoder is the state of one Decode call. It lives on the caller's stack.
type decoder struct {
	c *signal.Common
	// hints holds, per context and previous key (+1, 0 starts a list), the
	// KeyID + 1 of the key that followed it last (0: none).
	hints [numCtx][hintSlots]signal.KeyID
	prev  [numCtx]signal.KeyID // KeyID + 1 of the previous key of the list
}

var (
	schemaKeyValue = newSchema("key_value", 1, wtLen, "key", 2, wtLen, "value", 3, wtVarint, "key_strindex")
	schemaAnyValue = newSchema("any_value", 1, wtLen, "string_value", 2, wtVarint, "bool_value", 3, wtVarint, "int_value", 4, wtI64, "double_value", 5, wtLen, "array_value", 6, wtLen, "kvlist_value", 7, wtLen, "bytes_value", 8, wtVarint, "string_value_strindex")
	schemaList     = newSchema("values", 1, wtLen, "values")
	schemaResource = newSchema("resource", 1, wtLen, "attributes", 2, wtVarint, "dropped_attributes_count", 3, wtLen, "entity_refs")
	schemaScope    = newSchema("scope", 1, wtLen, "name", 2, wtLen, "version", 3, wtLen, "attributes", 4, wtVarint, "dropped_attributes_count")
	schemaEvent    = newSchema("event", 1, wtI64, "time_unix_nano", 2, wtLen, "name", 3, wtLen, "attributes", 4, wtVarint, "dropped_attributes_count")
	schemaLink     = newSchema("link", 1, wtLen, "trace_id", 2, wtLen, "span_id", 3, wtLen, "trace_state", 4, wtLen, "attributes", 5, wtVarint, "dropped_attributes_count", 6, wtI32, "flags")
	schemaExemplar = newSchema("exemplar", 7, wtLen, "filtered_attributes", 2, wtI64, "time_unix_nano", 3, wtI64, "as_double", 6, wtI64, "as_int", 4, wtLen, "span_id", 5, wtLen, "trace_id")
	schemaRequest  = newSchema("request", 1, wtLen, "resource")
	// Fields a ResourceX and ScopeX share: 1 the resource or scope, 2 the
	// children, 3 the schema URL.
	schemaHeader = newSchema("", 1, wtLen, "resource or scope", 2, wtLen, "children", 3, wtLen, "schema_url")
)

// str returns the Str of b[s:e] after checking it is UTF-8. Positions in the
// arena are Str offsets, because the request was copied there whole.
func (d *decoder) str(b []byte, s, e int, what string) (signal.Str, error) {
	if !validUTF8(b[s:e]) {
		return 0, fmt.Errorf("%s: %w", what, ErrInvalidUTF8)
	}
	return signal.MakeStr(s, e-s), nil
}

// keyValue decodes the KeyValue at b[i:] and appends it to the attributes.
func (d *decoder) keyValue(b []byte, i int, hint *signal.KeyID) error {
	ks, ke := i, i
	vt, v := signal.ValueEmpty, uint64(0)
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("key_value", j)
		}
		switch tag {
		case 1<<3 | wtLen:
			if j < len(b) && b[j] < 0x80 && j+1+int(b[j]) <= len(b) {
				ks, ke = j+1, j+1+int(b[j])
			} else {
				ks, ke = lenFieldSlow(b, j)
			}
			if ke < 0 {
				return schemaKeyValue.truncErr(tag, ke)
			}
			i = ke
		case 2<<3 | wtLen:
			var s, e int
			if j < len(b) && b[j] < 0x80 && j+1+int(b[j]) <= len(b) {
				s, e = j+1, j+1+int(b[j])
			} else {
				s, e = lenFieldSlow(b, j)
			}
			if e < 0 {
				return schemaKeyValue.truncErr(tag, e)
			}
			var err error
			if vt, v, err = d.anyValue(b[:e], s, 0); err != nil {
				return fmt.Errorf("key %q: %w", b[ks:ke], err)
			}
			i = e
		default:
			var err error
			if i, err = schemaKeyValue.skip(b, j, tag); err != nil {
				return err
			}
		}
	}
	key := b[ks:ke]
	id := *hint - 1
	if *hint == 0 || string(key) != d.c.Keys.Name(id) {
		if !validUTF8(key) {
			return fmt.Errorf("key: %w", ErrInvalidUTF8)
		}
		id = d.c.Keys.ID(key)
		*hint = id + 1
	}
	d.c.Attrs.Append(id, vt, v)
	return nil
}

// attr decodes the KeyValue field whose tag ended at j, number n of a list
// of context ctx, and returns the position after it.
func (d *decoder) attr(b []byte, j int, ctx, n int) (int, error) {
	var s, e int
	if j < len(b) && b[j] < 0x80 && j+1+int(b[j]) <= len(b) {
		s, e = j+1, j+1+int(b[j])
	} else if s, e = lenFieldSlow(b, j); e < 0 {
		return 0, at(posErr(e), "attributes[%d]", n)
	}
	if n == 0 {
		d.prev[ctx] = 0
	}
	hint := &d.hints[ctx][d.prev[ctx]&(hintSlots-1)]
	if err := d.keyValue(b[:e], s, hint); err != nil {
		return 0, at(err, "attributes[%d]", n)
	}
	d.prev[ctx] = *hint
	return e, nil
}

// anyValue decodes the AnyValue at b[i:] (b ends with it). Arrays and maps
// are validated and stored as the raw bytes of the whole AnyValue.
func (d *decoder) anyValue(b []byte, i int, depth int) (signal.ValueType, uint64, error) {
	start := i
	vt, v := signal.ValueEmpty, uint64(0)
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return 0, 0, tagErr("any_value", j)
		}
		switch tag {
		case 1<<3 | wtLen, 7<<3 | wtLen:
			var s, e int
			if j < len(b) && b[j] < 0x80 && j+1+int(b[j]) <= len(b) {
				s, e = j+1, j+1+int(b[j])
			} else {
				s, e = lenFieldSlow(b, j)
			}
			if e < 0 {
				return 0, 0, schemaAnyValue.truncErr(tag, e)
			}
			if tag == 1<<3|wtLen {
				if !validUTF8(b[s:e]) {
					return 0, 0, fmt.Errorf("string_value: %w", ErrInvalidUTF8)
				}
				vt = signal.ValueString
			} else {
				vt = signal.ValueBytes
			}
			v = uint64(signal.MakeStr(s, e-s))
			i = e
		case 2<<3 | wtVarint, 3<<3 | wtVarint:
			x, e := uint64(0), j+1
			if j < len(b) && b[j] < 0x80 {
				x = uint64(b[j])
			} else {
				x, e = uvarintSlow(b, j)
			}
			if e < 0 {
				return 0, 0, schemaAnyValue.truncErr(tag, e)
			}
			if tag == 2<<3|wtVarint {
				vt, v = signal.ValueBool, 0
				if x != 0 {
					v = 1
				}
			} else {
				vt, v = signal.ValueInt, x
			}
			i = e
		case 4<<3 | wtI64:
			x, e := fixed64(b, j)
			if e < 0 {
				return 0, 0, schemaAnyValue.truncErr(tag, e)
			}
			vt, v = signal.ValueDouble, x
			i = e
		case 5<<3 | wtLen, 6<<3 | wtLen:
			var s, e int
			if j < len(b) && b[j] < 0x80 && j+1+int(b[j]) <= len(b) {
				s, e = j+1, j+1+int(b[j])
			} else {
				s, e = lenFieldSlow(b, j)
			}
			if e < 0 {
				return 0, 0, schemaAnyValue.truncErr(tag, e)
			}
			if depth >= maxDepth {
				return 0, 0, ErrTooDeep
			}
			isMap := tag == 6<<3|wtLen
			if err := d.checkList(b[:e], s, isMap, depth+1); err != nil {
				return 0, 0, err
			}
			vt = signal.ValueArray
			if isMap {
				vt = signal.ValueMap
			}
			i = e
		default:
			var err error
			if i, err = schemaAnyValue.skip(b, j, tag); err != nil {
				return 0, 0, err
			}
		}
	}
	if vt == signal.ValueArray || vt == signal.ValueMap {
		v = uint64(signal.MakeStr(start, len(b)-start))
	}
	return vt, v, nil
}

// checkList validates an ArrayValue (isMap false) or KeyValueList.
func (d *decoder) checkList(b []byte, i int, isMap bool, depth int) error {
	name := "array_value"
	if isMap {
		name = "kvlist_value"
	}
	n := 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return fmt.Errorf("%s: %w", name, tagErr("values", j))
		}
		if tag != 1<<3|wtLen {
			var err error
			if i, err = schemaList.skip(b, j, tag); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			continue
		}
		var s, e int
		if j < len(b) && b[j] < 0x80 && j+1+int(b[j]) <= len(b) {
			s, e = j+1, j+1+int(b[j])
		} else {
			s, e = lenFieldSlow(b, j)
		}
		if e < 0 {
			return fmt.Errorf("%s.values[%d]: %w", name, n, posErr(e))
		}
		var err error
		if isMap {
			err = d.checkKeyValue(b[:e], s, depth)
		} else {
			_, _, err = d.anyValue(b[:e], s, depth)
		}
		if err != nil {
			return fmt.Errorf("%s.values[%d]: %w", name, n, err)
		}
		n++
		i = e
	}
	return nil
}

// checkKeyValue validates a KeyValue without storing it.
func (d *decoder) checkKeyValue(b []byte, i int, depth int) error {
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("key_value", j)
		}
		switch tag {
		case 1<<3 | wtLen:
			var s, e int
			if j < len(b) && b[j] < 0x80 && j+1+int(b[j]) <= len(b) {
				s, e = j+1, j+1+int(b[j])
			} else {
				s, e = lenFieldSlow(b, j)
			}
			if e < 0 {
				return schemaKeyValue.truncErr(tag, e)
			}
			if !validUTF8(b[s:e]) {
				return fmt.Errorf("key: %w", ErrInvalidUTF8)
			}
			i = e
		case 2<<3 | wtLen:
			var s, e int
			if j < len(b) && b[j] < 0x80 && j+1+int(b[j]) <= len(b) {
				s, e = j+1, j+1+int(b[j])
			} else {
				s, e = lenFieldSlow(b, j)
			}
			if e < 0 {
				return schemaKeyValue.truncErr(tag, e)
			}
			if _, _, err := d.anyValue(b[:e], s, depth); err != nil {
				return fmt.Errorf("value: %w", err)
			}
			i = e
		default:
			var err error
			if i, err = schemaKeyValue.skip(b, j, tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAttrField validates the KeyValue field whose tag ended at j, number
// n of its list, in a nested message kept raw; it returns the position
// after it.
func (d *decoder) checkAttrField(b []byte, j int, tag uint64, sc *schema, n int) (int, error) {
	s, e := lenField(b, j)
	if e < 0 {
		return 0, fmt.Errorf("%s[%d]: %w", sc.field(tag>>3), n, posErr(e))
	}
	if err := d.checkKeyValue(b[:e], s, 0); err != nil {
		return 0, fmt.Errorf("%s[%d]: %w", sc.field(tag>>3), n, err)
	}
	return e, nil
}

// idField reads a trace id (want 16) or span id (want 8) at j.
func idField(b []byte, j int, tag uint64, sc *schema, want int) (s, e int, err error) {
	s, e = lenField(b, j)
	if e < 0 {
		return 0, 0, sc.truncErr(tag, e)
	}
	if n := e - s; n != want && n != 0 {
		return 0, 0, fmt.Errorf("%s has %d bytes, want %d or 0: %w", sc.field(tag>>3), n, want, ErrIDLength)
	}
	return s, e, nil
}

// checkEvent validates a Span.Event kept as raw bytes.
func (d *decoder) checkEvent(b []byte, i int) error {
	n := 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("event", j)
		}
		var err error
		switch tag {
		case 2<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return schemaEvent.truncErr(tag, e)
			}
			if !validUTF8(b[s:e]) {
				return fmt.Errorf("name: %w", ErrInvalidUTF8)
			}
			i = e
		case 3<<3 | wtLen:
			i, err = d.checkAttrField(b, j, tag, schemaEvent, n)
			n++
		default:
			i, err = schemaEvent.skip(b, j, tag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkLink validates a Span.Link kept as raw bytes.
func (d *decoder) checkLink(b []byte, i int) error {
	n := 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("link", j)
		}
		var err error
		switch tag {
		case 1<<3 | wtLen:
			_, i, err = idField(b, j, tag, schemaLink, 16)
		case 2<<3 | wtLen:
			_, i, err = idField(b, j, tag, schemaLink, 8)
		case 3<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return schemaLink.truncErr(tag, e)
			}
			if !validUTF8(b[s:e]) {
				return fmt.Errorf("trace_state: %w", ErrInvalidUTF8)
			}
			i = e
		case 4<<3 | wtLen:
			i, err = d.checkAttrField(b, j, tag, schemaLink, n)
			n++
		default:
			i, err = schemaLink.skip(b, j, tag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkExemplar validates an Exemplar kept as raw bytes.
func (d *decoder) checkExemplar(b []byte, i int) error {
	n := 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("exemplar", j)
		}
		var err error
		switch tag {
		case 4<<3 | wtLen:
			_, i, err = idField(b, j, tag, schemaExemplar, 8)
		case 5<<3 | wtLen:
			_, i, err = idField(b, j, tag, schemaExemplar, 16)
		case 7<<3 | wtLen:
			i, err = d.checkAttrField(b, j, tag, schemaExemplar, n)
			n++
		default:
			i, err = schemaExemplar.skip(b, j, tag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// resource decodes a Resource into slot idx (a later Resource field of the
// same message replaces an earlier one, as protobuf merges it).
func (d *decoder) resource(b []byte, i int, idx uint32) error {
	r := signal.Resource{SchemaURL: d.c.Resources[idx].SchemaURL}
	start := uint32(d.c.Attrs.Len())
	n := 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("resource", j)
		}
		switch tag {
		case 1<<3 | wtLen:
			var err error
			if i, err = d.attr(b, j, ctxResource, n); err != nil {
				return err
			}
			n++
		case 2<<3 | wtVarint:
			v, e := uvarint(b, j)
			if e < 0 {
				return schemaResource.truncErr(tag, e)
			}
			r.DroppedAttrs = uint32(v)
			i = e
		default:
			// entity_refs (field 3) have no column yet; they are skipped.
			var err error
			if i, err = schemaResource.skip(b, j, tag); err != nil {
				return err
			}
		}
	}
	r.Attrs = signal.Range{Start: start, End: uint32(d.c.Attrs.Len())}
	d.c.Resources[idx] = r
	return nil
}

// scope decodes an InstrumentationScope into slot idx.
func (d *decoder) scope(b []byte, i int, idx uint32) error {
	sc := signal.Scope{SchemaURL: d.c.Scopes[idx].SchemaURL}
	start := uint32(d.c.Attrs.Len())
	n := 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("scope", j)
		}
		switch tag {
		case 1<<3 | wtLen, 2<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return schemaScope.truncErr(tag, e)
			}
			str, err := d.str(b, s, e, schemaScope.field(tag>>3))
			if err != nil {
				return err
			}
			if tag == 1<<3|wtLen {
				sc.Name = str
			} else {
				sc.Version = str
			}
			i = e
		case 3<<3 | wtLen:
			var err error
			if i, err = d.attr(b, j, ctxScope, n); err != nil {
				return err
			}
			n++
		case 4<<3 | wtVarint:
			v, e := uvarint(b, j)
			if e < 0 {
				return schemaScope.truncErr(tag, e)
			}
			sc.DroppedAttrs = uint32(v)
			i = e
		default:
			var err error
			if i, err = schemaScope.skip(b, j, tag); err != nil {
				return err
			}
		}
	}
	sc.Attrs = signal.Range{Start: start, End: uint32(d.c.Attrs.Len())}
	d.c.Scopes[idx] = sc
	return nil
}

// Names of the levels of each request, for error paths.
type levelNames struct{ resourceX, scopeX string }

var (
	logsNames    = levelNames{"resource_logs", "scope_logs"}
	metricsNames = levelNames{"resource_metrics", "scope_metrics"}
	tracesNames  = levelNames{"resource_spans", "scope_spans"}
)

// scopeXFunc decodes one ScopeX message of a signal; it is called once per
// ScopeX, never per record.
type scopeXFunc func(b []byte, i int, res uint32) error

// request decodes the ResourceX messages of an export request.
func (d *decoder) request(b []byte, i int, names *levelNames, scopeX scopeXFunc) error {
	for ri := 0; i < len(b); {
		tag, j := uvarint(b, i)
		if j < 0 {
			return fmt.Errorf("%s[%d]: %w", names.resourceX, ri, tagErr("request", j))
		}
		if tag != 1<<3|wtLen {
			var err error
			if i, err = schemaRequest.skip(b, j, tag); err != nil {
				return fmt.Errorf("after %s[%d]: %w", names.resourceX, ri, err)
			}
			continue
		}
		rs, re := lenField(b, j)
		if re < 0 {
			return fmt.Errorf("%s[%d]: %w", names.resourceX, ri, posErr(re))
		}
		if err := d.resourceX(b[:re], rs, names, scopeX); err != nil {
			return at(err, "%s[%d]", names.resourceX, ri)
		}
		ri++
		i = re
	}
	return nil
}

// resourceX decodes a ResourceX in one pass: the Resource slot is appended
// first and filled when its field arrives, wherever it is. A second pass
// reads the deprecated field 1000, used only when field 2 is absent, as the
// official decoders do.
func (d *decoder) resourceX(b []byte, i int, names *levelNames, scopeX scopeXFunc) error {
	res := uint32(len(d.c.Resources))
	d.c.Resources = append(d.c.Resources, signal.Resource{})
	start := i
	si := 0
	has1000 := false
	for i < len(b) {
		tag, j := uvarint(b, i)
		if j < 0 {
			return tagErr("", j)
		}
		switch tag {
		case 1<<3 | wtLen, 2<<3 | wtLen, 3<<3 | wtLen, 1000<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return schemaHeader.truncErr(tag, e)
			}
			var err error
			switch tag >> 3 {
			case 1:
				if err = d.resource(b[:e], s, res); err != nil {
					return at(err, "resource")
				}
			case 2:
				if err = scopeX(b[:e], s, res); err != nil {
					return at(err, "%s[%d]", names.scopeX, si)
				}
				si++
			case 3:
				if d.c.Resources[res].SchemaURL, err = d.str(b, s, e, "schema_url"); err != nil {
					return err
				}
			default:
				has1000 = true
			}
			i = e
		default:
			var err error
			if i, err = schemaHeader.skip(b, j, tag); err != nil {
				return err
			}
		}
	}
	if si > 0 || !has1000 {
		return nil
	}
	for i = start; i < len(b); {
		tag, j := uvarint(b, i)
		s, e := lenField(b, j)
		if tag == 1000<<3|wtLen {
			if err := scopeX(b[:e], s, res); err != nil {
				return at(err, "%s[%d]", names.scopeX, si)
			}
			si++
			i = e
			continue
		}
		i = skipValue(b, j, tag, 0) // checked in the first pass
	}
	return nil
}

// beginScope appends the Scope slot of a ScopeX; scopeField fills it.
func (d *decoder) beginScope() uint32 {
	d.c.Scopes = append(d.c.Scopes, signal.Scope{})
	return uint32(len(d.c.Scopes) - 1)
}

// scopeField handles a ScopeX field other than the records (field 2): the
// scope, the schema URL, or an unknown field.
func (d *decoder) scopeField(b []byte, j int, tag uint64, sc uint32) (int, error) {
	switch tag {
	case 1<<3 | wtLen, 3<<3 | wtLen:
		s, e := lenField(b, j)
		if e < 0 {
			return 0, schemaHeader.truncErr(tag, e)
		}
		if tag == 1<<3|wtLen {
			if err := d.scope(b[:e], s, sc); err != nil {
				return 0, at(err, "scope")
			}
		} else {
			var err error
			if d.c.Scopes[sc].SchemaURL, err = d.str(b, s, e, "schema_url"); err != nil {
				return 0, err
			}
		}
		return e, nil
	}
	return schemaHeader.skip(b, j, tag)
}

// pathError carries the dotted path of the element that failed, built
// outward as the error returns through the levels.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// at prefixes err's path with one more segment.
func at(err error, format string, args ...any) error {
	seg := fmt.Sprintf(format, args...)
	var pe *pathError
	if errors.As(err, &pe) && pe == err {
		pe.path = seg + "." + pe.path
		return pe
	}
	return &pathError{path: seg, err: err}
}

// arenaRoom checks that the arena can take n more bytes and still be
// addressed by a Str.
func arenaRoom(c *signal.Common, n int) error {
	if uint64(len(c.Buf))+uint64(n) > math.MaxUint32 {
		return fmt.Errorf("request of %d bytes after %d: %w", n, len(c.Buf), ErrTooLarge)
	}
	return nil
}

// mark records the lengths of the shared parts of a batch so that a failed
// decode can be undone.
type mark struct {
	buf, attrs, res, scopes, msgs, keys int
}

func markCommon(c *signal.Common) mark {
	return mark{len(c.Buf), c.Attrs.Len(), len(c.Resources), len(c.Scopes), len(c.Msgs), c.Keys.Len()}
}

func (m mark) restore(c *signal.Common) {
	c.Buf = c.Buf[:m.buf]
	c.Attrs.Key = c.Attrs.Key[:m.attrs]
	c.Attrs.Type = c.Attrs.Type[:m.attrs]
	c.Attrs.Val = c.Attrs.Val[:m.attrs]
	c.Resources = c.Resources[:m.res]
	c.Scopes = c.Scopes[:m.scopes]
	c.Msgs = c.Msgs[:m.msgs]
	c.Keys.Truncate(m.keys)
}

// next returns the payload bounds of the next field with tag want at or
// after i, skipping others; for second passes over checked messages.
func next(b []byte, i int, want uint64) (s, e, after int) {
	for i < len(b) {
		tag, j := uvarint(b, i)
		if tag == want {
			s, e = lenField(b, j)
			return s, e, e
		}
		if i = skipValue(b, j, tag, 0); i < 0 {
			break
		}
	}
	return 0, 0, -1
}
