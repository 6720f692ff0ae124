package catalog

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

const dayLayout = "2006-01-02"

// PartitionDir returns the lake directory of one hour partition,
// "<table>/tenant=<tenant>/dt=<day>/hour=<HH>", slash-separated.
// Values are used verbatim, so they must not contain '/'.
func PartitionDir(table, tenant, day string, hour int) string {
	return fmt.Sprintf("%s/tenant=%s/dt=%s/hour=%02d", table, tenant, day, hour)
}

// PartitionStart returns the first instant (UTC) of the hour partition
// day ("YYYY-MM-DD") and hour; the zero time if day is malformed (the
// catalog validates the days it stores).
func PartitionStart(day string, hour int) time.Time {
	d, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return time.Time{}
	}
	return d.Add(time.Duration(hour) * time.Hour)
}

// partition is the table/tenant/day/hour named by a segment path.
type partition struct {
	table, tenant, day string
	hour               int
}

// parsePath splits a slash-separated lake path of the form
// <table>/tenant=<t>/dt=YYYY-MM-DD/hour=HH/<id>.parquet.
func parsePath(p string) (partition, error) {
	parts := strings.Split(p, "/")
	if len(parts) != 5 {
		return partition{}, fmt.Errorf("path %q: want <table>/tenant=<t>/dt=YYYY-MM-DD/hour=HH/<id>.parquet", p)
	}
	var pt partition
	var ok bool
	pt.table = parts[0]
	if pt.tenant, ok = strings.CutPrefix(parts[1], "tenant="); !ok {
		return partition{}, fmt.Errorf("path %q: second element %q is not tenant=<t>", p, parts[1])
	}
	if pt.day, ok = strings.CutPrefix(parts[2], "dt="); !ok {
		return partition{}, fmt.Errorf("path %q: third element %q is not dt=YYYY-MM-DD", p, parts[2])
	}
	hh, ok := strings.CutPrefix(parts[3], "hour=")
	if !ok || len(hh) != 2 {
		return partition{}, fmt.Errorf("path %q: fourth element %q is not hour=HH", p, parts[3])
	}
	h, err := strconv.Atoi(hh)
	if err != nil {
		return partition{}, fmt.Errorf("path %q: hour %q: %w", p, hh, err)
	}
	pt.hour = h
	if !strings.HasSuffix(parts[4], ".parquet") || len(parts[4]) == len(".parquet") {
		return partition{}, fmt.Errorf("path %q: file name is not <id>.parquet", p)
	}
	if err := checkPartition(pt.table, pt.tenant, pt.day, pt.hour); err != nil {
		return partition{}, fmt.Errorf("path %q: %w", p, err)
	}
	return pt, nil
}

func checkPartition(table, tenant, day string, hour int) error {
	if !validName(table) {
		return fmt.Errorf("table %q: want [a-z0-9_]+", table)
	}
	if tenant == "" || tenant == "." || tenant == ".." || strings.ContainsAny(tenant, "/\\\x00") {
		return fmt.Errorf("tenant %q: must be non-empty and contain no path separator", tenant)
	}
	if _, err := time.Parse(dayLayout, day); err != nil {
		return fmt.Errorf("day %q: want YYYY-MM-DD", day)
	}
	if hour < 0 || hour > 23 {
		return fmt.Errorf("hour %d: want 0..23", hour)
	}
	return nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_') {
			return false
		}
	}
	return true
}

// hourBounds returns the unix-ns range [start, end) of a partition hour.
func hourBounds(day string, hour int) (start, end int64) {
	t, _ := time.Parse(dayLayout, day) // validated by checkPartition
	s := t.Add(time.Duration(hour) * time.Hour)
	return s.UnixNano(), s.Add(time.Hour).UnixNano()
}

// validate enforces the invariants every catalogued segment satisfies, the
// same ones Rebuild checks on files, so a row the catalog accepts always
// survives a rebuild.
func (s *Segment) validate() error {
	if err := checkPartition(s.Table, s.Tenant, s.Day, s.Hour); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidSegment, s.Path, err)
	}
	if path.Clean(s.Path) != s.Path {
		return fmt.Errorf("%w: path %q is not clean", ErrInvalidSegment, s.Path)
	}
	pt, err := parsePath(s.Path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSegment, err)
	}
	if pt != (partition{s.Table, s.Tenant, s.Day, s.Hour}) {
		return fmt.Errorf("%w: path %q is not under %s", ErrInvalidSegment, s.Path, PartitionDir(s.Table, s.Tenant, s.Day, s.Hour))
	}
	if err := checkTimes(s.MinTime, s.MaxTime, s.Day, s.Hour); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidSegment, s.Path, err)
	}
	if s.Rows < 0 || s.Bytes < 0 || s.Level < 0 || s.QueuePos < 0 {
		return fmt.Errorf("%w: %q: negative rows, bytes, level or queue position", ErrInvalidSegment, s.Path)
	}
	return nil
}

// checkTimes: data is partitioned by event time, so a segment's whole time
// range lies in its hour.
func checkTimes(minT, maxT int64, day string, hour int) error {
	if minT > maxT {
		return fmt.Errorf("min time %d after max time %d", minT, maxT)
	}
	start, end := hourBounds(day, hour)
	if minT < start || maxT >= end {
		return fmt.Errorf("time range [%d, %d] outside partition dt=%s/hour=%02d [%d, %d)", minT, maxT, day, hour, start, end)
	}
	return nil
}
