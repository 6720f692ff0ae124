package search

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// Bounds of representable times (int64 unix nanoseconds).
var (
	minNs = time.Unix(0, math.MinInt64).UTC()
	maxNs = time.Unix(0, math.MaxInt64).UTC()
)

// parseTime accepts RFC 3339 (with or without fractional seconds), unix
// nanoseconds (an integer of 16 or more digits) or unix seconds (any other
// number, with an optional fraction).
func parseTime(s string) (int64, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.Before(minNs) || t.After(maxNs) {
			return 0, fmt.Errorf("%q is outside the years 1678-2262", s)
		}
		return t.UnixNano(), nil
	}
	digits := strings.TrimPrefix(s, "-")
	if len(digits) >= 16 && strings.Trim(digits, "0123456789") == "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a valid unix time in nanoseconds: %w", s, err)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("cannot parse %q as a time: use RFC 3339, unix seconds or unix nanoseconds", s)
	}
	if f >= math.MaxInt64/1e9 || f <= math.MinInt64/1e9 {
		return 0, fmt.Errorf("%q is outside the years 1678-2262", s)
	}
	sec, frac := math.Modf(f)
	return int64(sec)*1e9 + int64(math.Round(frac*1e9)), nil
}

// parseDuration accepts a Go duration ("250ms", "1h30m") or an integer of
// nanoseconds.
func parseDuration(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q as a duration: use Go syntax (250ms, 1h30m) or integer nanoseconds", s)
	}
	return int64(d), nil
}

// params checks the query string of one endpoint: every name must be
// known (exactly, or by one of the prefixes), and given at most once.
type params struct {
	v url.Values
}

func parseParams(raw string, names []string, prefixes []string) (*params, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badData("invalid query string: %v", err)
	}
	for name, vals := range v {
		known := false
		for _, n := range names {
			if name == n {
				known = true
				break
			}
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				known = true
				break
			}
		}
		if !known {
			return nil, badData("unknown parameter %q (known: %s, and %s followed by a key)",
				name, strings.Join(names, ", "), strings.Join(prefixes, "<key>, "))
		}
		if len(vals) != 1 {
			return nil, badData("parameter %q given %d times; give it once", name, len(vals))
		}
	}
	return &params{v: v}, nil
}

func (p *params) get(name string) string { return p.v.Get(name) }

// timeRange returns [start, end) from the start and end parameters; the
// default is the last DefaultRange before now.
func (p *params) timeRange(now time.Time) (start, end int64, err error) {
	end = now.UnixNano()
	if s := p.get("end"); s != "" {
		if end, err = parseTime(s); err != nil {
			return 0, 0, badData("invalid parameter \"end\": %v", err)
		}
	}
	start = end - int64(DefaultRange)
	if s := p.get("start"); s != "" {
		if start, err = parseTime(s); err != nil {
			return 0, 0, badData("invalid parameter \"start\": %v", err)
		}
	}
	if end <= start {
		return 0, 0, badData("invalid time range: end (%s) must be after start (%s)", fmtNs(end), fmtNs(start))
	}
	return start, end, nil
}

func fmtNs(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func (p *params) limit(max int) (int, error) {
	s := p.get("limit")
	if s == "" {
		return min(DefaultLimit, max), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, badData("invalid parameter \"limit\": %q is not a positive integer", s)
	}
	if n > max {
		return 0, limitErr("limit %d is above the maximum of %d (query max_limit)", n, max)
	}
	return n, nil
}

// attrFilters turns attr.<key>, attr_re.<key>, resource.<key> and
// resource_re.<key> parameters into predicates.
func (p *params) attrFilters() ([]pred, error) {
	var out []pred
	for name, vals := range p.v {
		for _, pf := range [...]struct {
			param, col string
			re         bool
		}{{"attr.", format.PrefixRecord, false}, {"attr_re.", format.PrefixRecord, true},
			{"resource.", format.PrefixResource, false}, {"resource_re.", format.PrefixResource, true}} {
			if !strings.HasPrefix(name, pf.param) {
				continue
			}
			key := name[len(pf.param):]
			pr := pred{kind: predAttr, prefix: pf.col, key: key, s: vals[0]}
			if pf.re {
				re, err := regexp.Compile("^(?:" + vals[0] + ")$")
				if err != nil {
					return nil, badData("invalid regular expression in %q: %v", name, err)
				}
				pr.kind, pr.re = predAttrRe, re
			}
			out = append(out, pr)
		}
	}
	return out, nil
}

// cursor is the position of the last record of a page: results continue
// strictly after it in the order (time desc, path asc, row asc).
type cursor struct {
	t    int64
	path string
	row  int64
}

func (c *cursor) encode() string {
	b := binary.AppendVarint(nil, c.t)
	b = binary.AppendUvarint(b, uint64(c.row))
	b = append(b, c.path...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (*cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, badData("invalid parameter \"cursor\": not a cursor returned by this API")
	}
	t, n := binary.Varint(b)
	if n <= 0 {
		return nil, badData("invalid parameter \"cursor\": not a cursor returned by this API")
	}
	b = b[n:]
	row, n := binary.Uvarint(b)
	if n <= 0 || row > math.MaxInt64 {
		return nil, badData("invalid parameter \"cursor\": not a cursor returned by this API")
	}
	return &cursor{t: t, row: int64(row), path: string(b[n:])}, nil
}
