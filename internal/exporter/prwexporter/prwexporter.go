package prwexporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// maxSeriesPerRequest bounds one WriteRequest (Prometheus's own sender
// defaults to 2000 samples per request).
const maxSeriesPerRequest = 2000

// Config of a remote-write exporter.
type Config struct {
	Endpoints    []string // full push URLs
	Protocol     string   // "1.0" (2.0 not yet)
	Shard        bool     // shard series over the endpoints; else replicate
	TenantHeader string
	Headers      map[string]string
	Timeout      time.Duration
	Policy       sending.Policy
}

// Exporter is an exporter.Sender for remote write.
type Exporter struct {
	cfg  Config
	eps  []*sending.Endpoint
	ring *sending.Ring
	hc   *http.Client
	cv   converter
	m    signal.Metrics

	droppedPoints, badBodies, sentSeries atomic.Uint64
}

// New validates cfg.
func New(cfg Config) (*Exporter, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("prwexporter: no endpoints")
	}
	if cfg.Protocol != "" && cfg.Protocol != "1.0" {
		return nil, fmt.Errorf("prwexporter: protocol %q is not implemented in this build (1.0 is)", cfg.Protocol)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	e := &Exporter{cfg: cfg, hc: &http.Client{Timeout: cfg.Timeout}, ring: sending.NewRing(cfg.Endpoints)}
	for _, u := range cfg.Endpoints {
		e.eps = append(e.eps, sending.NewEndpoint(u, cfg.Policy))
	}
	return e, nil
}

// Endpoints implements exporter.Sender.
func (e *Exporter) Endpoints() []*sending.Endpoint { return e.eps }

// Stats: points remote write 1.0 cannot carry (delta sums and histograms,
// unknown types), metric bodies that do not decode, series sent.
func (e *Exporter) Stats() (droppedPoints, badBodies, sentSeries uint64) {
	return e.droppedPoints.Load(), e.badBodies.Load(), e.sentSeries.Load()
}

// DroppedPoints reports points remote write 1.0 cannot carry and metric
// bodies that did not decode (for /metrics).
func (e *Exporter) DroppedPoints() (unsupported, badBodies uint64) {
	return e.droppedPoints.Load(), e.badBodies.Load()
}

// seriesHash hashes a series' sorted labels.
func seriesHash(ls []prompb.Label) uint64 {
	d := xxhash.New()
	for _, l := range ls {
		d.WriteString(l.Name)
		d.Write([]byte{0xff})
		d.WriteString(l.Value)
		d.Write([]byte{0xff})
	}
	return d.Sum64()
}

// Send implements exporter.Sender. Records of one tenant are converted
// together; non-metrics records are ignored.
func (e *Exporter) Send(ctx context.Context, recs []exporter.Record) error {
	for i := 0; i < len(recs); {
		tenant := recs[i].Tenant
		e.cv.series = e.cv.series[:0]
		j := i
		for ; j < len(recs) && recs[j].Tenant == tenant; j++ {
			if recs[j].Kind != signal.KindMetrics {
				continue
			}
			e.m.Reset()
			if err := otlp.DecodeMetrics(&e.m, recs[j].Body); err != nil {
				e.badBodies.Add(1)
				continue
			}
			e.cv.dropped = 0
			e.cv.add(&e.m)
			e.droppedPoints.Add(e.cv.dropped)
		}
		if err := e.sendSeries(ctx, tenant, e.cv.series); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func (e *Exporter) sendSeries(ctx context.Context, tenant string, series []prompb.TimeSeries) error {
	if len(series) == 0 {
		return nil
	}
	per := make([][]prompb.TimeSeries, len(e.eps))
	if e.cfg.Shard && len(e.eps) > 1 {
		for _, s := range series {
			k := e.ring.Pick(seriesHash(s.Labels))
			per[k] = append(per[k], s)
		}
	} else {
		for k := range per {
			per[k] = series
		}
	}
	errs := make([]error, len(e.eps))
	var wg sync.WaitGroup
	for k, ep := range e.eps {
		if len(per[k]) == 0 {
			continue
		}
		wg.Go(func() {
			for s := per[k]; len(s) > 0; {
				n := min(len(s), maxSeriesPerRequest)
				body, err := (&prompb.WriteRequest{Timeseries: s[:n]}).Marshal()
				if err != nil {
					errs[k] = err
					return
				}
				payload := snappy.Encode(nil, body)
				err = ep.Do(ctx, func(ctx context.Context) sending.Outcome { return e.attempt(ctx, ep.Name, tenant, payload) })
				if err != nil && !errors.Is(err, sending.ErrRejected) {
					errs[k] = err
					return
				}
				if err == nil {
					e.sentSeries.Add(uint64(n))
				}
				s = s[n:]
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (e *Exporter) attempt(ctx context.Context, url, tenant string, payload []byte) sending.Outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return sending.Outcome{Status: 400, Err: err}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", "sluice")
	for h, v := range e.cfg.Headers {
		req.Header.Set(h, v)
	}
	if e.cfg.TenantHeader != "" {
		req.Header.Set(e.cfg.TenantHeader, tenant)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return sending.Outcome{Err: err}
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	o := sending.Outcome{Status: resp.StatusCode, RetryAfter: sending.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	if !o.OK() {
		o.Err = fmt.Errorf("%s", bytes.TrimSpace(msg))
	}
	return o
}
