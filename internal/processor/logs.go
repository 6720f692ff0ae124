package processor

import (
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/promname"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Log record labels besides the attributes and the resource's job,
// instance and service_name.
const (
	labelSeverityText   = "severity_text"
	labelSeverityNumber = "severity_number"
)

// ProcessLogs applies the log rules to b, like ProcessMetrics: false means
// b is kept as is; otherwise the kept records are in s.OutLogs.
//
// Records are not series, so nothing is cached: each record's labels are
// built when a rule has label matchers.
func (r *Rules) ProcessLogs(b *signal.Logs, s *Scratch) (changed bool, kept int) {
	if r == nil || len(r.logs) == 0 || b.Len() == 0 {
		return false, b.Len()
	}
	s.rules = r
	needLabels := false
	for i := range r.logs {
		if len(r.logs[i].ms)+len(r.logs[i].nameMs) > 0 {
			needLabels = true
		}
	}
	n := b.Len()
	out := &s.OutLogs
	copied := -1 // records [0, copied] are decided; -1: none dropped yet
	for i := 0; i < n; i++ {
		var l labels.Labels
		if needLabels {
			l = s.logLabels(b, i)
		}
		if !s.keepLog(b, i, l) {
			if copied < 0 {
				out.Reset()
				for k := 0; k < i; k++ {
					out.CopyFrom(b, k)
				}
				copied = i
			}
			continue
		}
		if copied >= 0 {
			out.CopyFrom(b, i)
		}
	}
	s.flushLogs()
	if copied < 0 {
		return false, n
	}
	return true, out.Len()
}

func (s *Scratch) flushLogs() {
	rs := s.rules.logs
	for i := range rs {
		c := &s.counts[i]
		if c[0] != 0 {
			rs[i].c.matched.Add(float64(c[0]))
		}
		if c[1] != 0 {
			rs[i].c.dropped.Add(float64(c[1]))
		}
		*c = [4]uint64{}
	}
}

// keepLog runs the rules on record i.
func (s *Scratch) keepLog(b *signal.Logs, i int, l labels.Labels) bool {
	for ri := range s.rules.logs {
		ru := &s.rules.logs[ri]
		c := &s.counts[ri]
		// Unspecified severity (0) is not "below" anything.
		sev := b.SeverityNum[i]
		m := matches(ru, l, nil) && (ru.maxSeverity == 0 || sev >= 1 && sev <= ru.maxSeverity)
		if m {
			c[0]++
		}
		drop := false
		switch ru.act {
		case actDrop:
			drop = m
		case actKeep:
			drop = !m
		case actSampleOneIn:
			drop = m && logHash(b, i)%ru.oneIn != 0
		case actSampleProb:
			drop = m && logHash(b, i) >= ru.threshold
		}
		if drop {
			c[1]++
			if !ru.shadow {
				return false
			}
		}
	}
	return true
}

// logHash is a uniform hash of a record's time, severity and body, the same
// in every process.
func logHash(b *signal.Logs, i int) uint64 {
	h := uint64(b.Time[i])*0x9E3779B97F4A7C15 ^ uint64(b.SeverityNum[i])
	switch b.BodyType[i] {
	case signal.ValueString, signal.ValueBytes, signal.ValueArray, signal.ValueMap:
		h ^= xxhash.Sum64(b.Bytes(signal.Str(b.Body[i])))
	default:
		h ^= mix(b.Body[i])
	}
	return mix(h ^ uint64(b.ObservedTime[i]))
}

func (s *Scratch) logLabels(b *signal.Logs, i int) labels.Labels {
	s.sb.Reset()
	job, inst := s.addResourceLabels(&b.Common, b.Resources[b.Resource[i]].Attrs)
	if t := b.String(b.SeverityText[i]); t != "" {
		s.sb.Add(labelSeverityText, t)
	}
	s.sb.Add(labelSeverityNumber, strconv.Itoa(int(b.SeverityNum[i])))
	s.kv = appendPointLabels(s.kv[:0], &b.Common, b.Attr[i], setLabels{job: job, instance: inst})
	promname.JoinCollisions(&s.sb, s.kv)
	s.sb.Sort()
	return s.sb.Labels()
}
