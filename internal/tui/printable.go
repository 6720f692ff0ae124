package tui

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/stats"
)

// Printable is s with every control character (C0, DEL, C1) and every
// byte that is not UTF-8 written as \xNN: names in a status document come
// from senders (a remote-write metric name may be any UTF-8) and from a
// remote process, and a terminal would obey an escape sequence in them
// (retitle the window, clear the screen, hide text).
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r >= 0x7f && r < 0xa0 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r >= 0x7f && r < 0xa0:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// cleanStatus makes every string of st printable, in place: the model
// renders only cleaned documents.
func cleanStatus(st *stats.Status) {
	cleanKeys := func(m map[string]uint64) map[string]uint64 {
		for k := range m {
			if Printable(k) != k {
				out := make(map[string]uint64, len(m))
				for k, v := range m {
					out[Printable(k)] += v
				}
				return out
			}
		}
		return m
	}
	for i := range st.Receivers {
		r := &st.Receivers[i]
		r.Receiver, r.Signal, r.Tenant, r.Requests = Printable(r.Receiver), Printable(r.Signal), Printable(r.Tenant), cleanKeys(r.Requests)
	}
	for i := range st.Tenants {
		r := &st.Tenants[i]
		r.Tenant, r.Signal = Printable(r.Tenant), Printable(r.Signal)
	}
	for i := range st.Exporters {
		e := &st.Exporters[i]
		e.Exporter = Printable(e.Exporter)
		for j := range e.Endpoints {
			ep := &e.Endpoints[j]
			ep.Endpoint, ep.Breaker = Printable(ep.Endpoint), Printable(ep.Breaker)
		}
	}
	st.Lake.Checkpoints = cleanKeys(st.Lake.Checkpoints)
	for i := range st.Rules {
		r := &st.Rules[i]
		r.Rule, r.Effects = Printable(r.Rule), cleanKeys(r.Effects)
		for j := range r.Metrics {
			rm := &r.Metrics[j]
			rm.Tenant, rm.Metric = Printable(rm.Tenant), Printable(rm.Metric)
		}
	}
	if s := st.Stats; s != nil {
		for i := range s.Tenants {
			s.Tenants[i].Tenant = Printable(s.Tenants[i].Tenant)
		}
		for i := range s.Metrics {
			s.Metrics[i].Tenant, s.Metrics[i].Metric = Printable(s.Metrics[i].Tenant), Printable(s.Metrics[i].Metric)
		}
		for i := range s.Labels {
			l := &s.Labels[i]
			l.Tenant, l.Metric, l.Label = Printable(l.Tenant), Printable(l.Metric), Printable(l.Label)
		}
	}
}
