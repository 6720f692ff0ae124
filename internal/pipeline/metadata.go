package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Remote-write metadata sent without series. Prometheus sends its
// targets' metric metadata (type, help, unit per family) in requests of
// their own, every metadata_config.send_interval, never next to the
// series. The lake's rows carry only metadata sent with them, so the
// consumer keeps the rest in the catalog (table metric_metadata, one
// entry per tenant and family, the latest sent), where /api/v1/metadata
// reads it. Prometheus resends it every minute: an entry is written only
// when it changes, and a tenant keeps at most maxFamilies families.

// familyMeta stores family metadata in the catalog.
type familyMeta struct {
	cat         *catalog.Catalog
	maxFamilies int
	now         func() time.Time

	mu sync.Mutex
	// held is, per tenant, what the catalog holds (loaded on the
	// tenant's first request, then kept as stored).
	held map[string]map[string]catalog.FamilyMetadata

	stored, unchanged, refused, invalid prometheus.Counter
}

func newFamilyMeta(cat *catalog.Catalog, maxFamilies int, reg prometheus.Registerer) *familyMeta {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_prw_metadata_families_total",
		Help: "Remote-write metric family metadata entries sent without series, by result: stored (new or changed), unchanged, refused (the tenant's max_metadata_families reached), invalid (no family name, not UTF-8, or over 16 KiB of help and unit).",
	}, []string{"result"})
	if reg != nil {
		reg.MustRegister(vec)
	}
	return &familyMeta{cat: cat, maxFamilies: maxFamilies, now: time.Now, held: map[string]map[string]catalog.FamilyMetadata{},
		stored: vec.WithLabelValues("stored"), unchanged: vec.WithLabelValues("unchanged"),
		refused: vec.WithLabelValues("refused"), invalid: vec.WithLabelValues("invalid")}
}

// put stores the metadata of body, a remote write 1.0 request
// (snappy-decoded), for tenant.
func (f *familyMeta) put(ctx context.Context, tn string, body []byte) error {
	ms, skipped, err := prw.FamilyMetadataV1(body)
	f.invalid.Add(float64(skipped))
	if err != nil {
		return fmt.Errorf("remote-write metadata: %w: %w", otlpreceiver.ErrInvalid, err)
	}
	if len(ms) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	held, ok := f.held[tn]
	if !ok {
		list, err := f.cat.ListFamilyMetadata(ctx, tn, "")
		if err != nil {
			return err
		}
		held = make(map[string]catalog.FamilyMetadata, len(list))
		for _, m := range list {
			m.Updated = time.Time{}
			held[m.Name] = m
		}
		f.held[tn] = held
	}
	now := f.now()
	var put []catalog.FamilyMetadata
	idx := map[string]int{} // a family sent twice in one request: the last one wins
	added := 0
	for _, m := range ms {
		e := catalog.FamilyMetadata{Name: m.Name, Type: m.Type, Help: m.Help, Unit: m.Unit}
		if i, dup := idx[m.Name]; dup {
			e.Updated = now
			put[i] = e
			continue
		}
		old, known := held[m.Name]
		switch {
		case known && old == e:
			f.unchanged.Inc()
			continue
		case !known && f.maxFamilies > 0 && len(held)+added >= f.maxFamilies:
			f.refused.Inc()
			continue
		case !known:
			added++
		}
		e.Updated = now
		idx[m.Name] = len(put)
		put = append(put, e)
	}
	if len(put) == 0 {
		return nil
	}
	refused, err := f.cat.PutFamilyMetadata(ctx, tn, put, f.maxFamilies)
	if err != nil {
		// Unknown state: reload the tenant's entries next time.
		delete(f.held, tn)
		return err
	}
	if refused > 0 {
		// Another writer of the catalog added families since the load.
		delete(f.held, tn)
		f.refused.Add(float64(refused))
		f.stored.Add(float64(len(put) - refused))
		return nil
	}
	for _, e := range put {
		e.Updated = time.Time{}
		held[e.Name] = e
	}
	f.stored.Add(float64(len(put)))
	return nil
}

// TakeMetadata implements prwreceiver.MetadataTaker: it keeps the
// family metadata of a remote write 1.0 request without samples in the
// catalog (with the lake on) and queues the request as received for the
// remote-write exporters (forwardMeta), before the request is answered.
func (c *consumer) TakeMetadata(ctx context.Context, tn string, raw, body []byte) error {
	if c.meta == nil && !c.forwardMeta {
		return nil
	}
	if err := c.takes(signal.KindMetrics); err != nil {
		return err
	}
	if err := c.admit(tn); err != nil {
		return err
	}
	if c.meta != nil {
		if err := c.meta.put(ctx, tn, body); err != nil {
			return err
		}
	}
	if !c.forwardMeta {
		return nil
	}
	// The lake loop and the other exporters read the record as a request
	// of no series: nothing to write, nothing to send.
	if _, err := c.q.Append(appendRecordTo(nil, signal.KindMetrics, encPRW1, tn, c.metricsDest(), raw)); err != nil {
		return c.appendFailed(err, len(raw))
	}
	return nil
}

// metricsDest is every consumer of a metrics route: nil (everyone) unless
// the pipelines route metrics to some consumers only.
func (c *consumer) metricsDest() dest {
	rt := c.routes
	if rt == nil || rt.plain[signal.KindMetrics] {
		return nil
	}
	var d dest
	for _, r := range rt.routes[signal.KindMetrics] {
		if r.dest == nil {
			return nil
		}
		for _, name := range r.dest {
			if !slices.Contains(d, name) {
				d = append(d, name)
			}
		}
	}
	return d
}
