package otlpreceiver

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Transport names, also the "transport" label values.
const (
	TransportGRPC = "grpc"
	TransportHTTP = "http"
)

type transportID uint8

const (
	tGRPC transportID = iota
	tHTTP
	numTransports
)

var transportNames = [numTransports]string{TransportGRPC, TransportHTTP}

// outcome is the "outcome" label of sluice_receiver_requests_total.
type outcome uint8

const (
	outcomeAccepted outcome = iota
	outcomeInvalid
	outcomeBackpressure
	outcomeTooLarge
	outcomeUnauthorized
	outcomeError
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"accepted", "rejected_invalid", "rejected_backpressure",
	"rejected_too_large", "rejected_unauthorized", "error",
}

const numKinds = int(signal.KindTraces) + 1

// metrics holds the receiver's collectors. Series without the tenant label
// are resolved once here so that the hot path does no label hashing.
type metrics struct {
	requests *prometheus.CounterVec
	bytes    [numTransports][numKinds]prometheus.Counter
	latency  [numTransports][numKinds]prometheus.Observer
	inFlight prometheus.Gauge
	// slowClients counts bodies cut for arriving too slowly (HTTP 408,
	// gRPC DeadlineExceeded), per transport.
	slowClients [numTransports]prometheus.Counter
	// Connections refused over Config.MaxConnections, and open now.
	connsRefused [numTransports]prometheus.Counter
	connsOpen    [numTransports]prometheus.Gauge
	// tooManyRecords counts requests refused for
	// Config.MaxRecordsPerRequest, per transport and signal.
	tooManyRecords [numTransports][numKinds]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_receiver_requests_total",
		Help: "OTLP export requests by transport, signal, tenant and outcome.",
	}, []string{"transport", "signal", "tenant", "outcome"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_receiver_request_bytes_total",
		Help: "Decompressed OTLP request body bytes read.",
	}, []string{"transport", "signal"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_receiver_request_duration_seconds",
		Help:    "Time from request start to response, including Consume.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"transport", "signal"})
	inFlight := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_receiver_in_flight_requests",
		Help: "Requests being consumed now (bodies already read).",
	})
	slow := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_receiver_slow_clients_total",
		Help: "Requests cut because their body arrived slower than receivers.otlp.min_body_rate or not within read_timeout.",
	}, []string{"transport"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_receiver_connections_refused_total",
		Help: "Connections closed at once because receivers.otlp.max_connections were open.",
	}, []string{"transport"})
	open := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_receiver_connections",
		Help: "Connections open now.",
	}, []string{"transport"})
	limited := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_receiver_limited_requests_total",
		Help: "Requests refused (400 / InvalidArgument) before decoding for a limit: limit=max_records_per_request.",
	}, []string{"transport", "signal", "limit"})
	if reg != nil {
		var err error
		if limited, err = register(reg, limited); err != nil {
			return nil, err
		}
		if slow, err = register(reg, slow); err != nil {
			return nil, err
		}
		if refused, err = register(reg, refused); err != nil {
			return nil, err
		}
		if open, err = register(reg, open); err != nil {
			return nil, err
		}
		if requests, err = register(reg, requests); err != nil {
			return nil, err
		}
		if bytes, err = register(reg, bytes); err != nil {
			return nil, err
		}
		if latency, err = register(reg, latency); err != nil {
			return nil, err
		}
		if inFlight, err = register(reg, inFlight); err != nil {
			return nil, err
		}
	}
	m := &metrics{requests: requests, inFlight: inFlight}
	for t := range numTransports {
		m.slowClients[t] = slow.WithLabelValues(transportNames[t])
		m.connsRefused[t] = refused.WithLabelValues(transportNames[t])
		m.connsOpen[t] = open.WithLabelValues(transportNames[t])
	}
	for t := range numTransports {
		for k := range numKinds {
			kind := signal.Kind(k).String()
			m.bytes[t][k] = bytes.WithLabelValues(transportNames[t], kind)
			m.latency[t][k] = latency.WithLabelValues(transportNames[t], kind)
			m.tooManyRecords[t][k] = limited.WithLabelValues(transportNames[t], kind, LimitRecordsPerRequest)
		}
	}
	return m, nil
}

// register registers c, reusing an identical collector that is already
// registered, so that two receivers can share one registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// observe records one finished request. tenant must be "" unless it was
// authenticated and validated: it is the only label fed by clients, and
// label (Config.TenantLabel) bounds it.
func (m *metrics) observe(t transportID, k signal.Kind, tenant string, label func(string) string, o outcome, bodyBytes int, start time.Time) {
	if tenant != "" && label != nil {
		tenant = label(tenant)
	}
	if int(k) >= numKinds {
		k = signal.KindUnknown
	}
	m.requests.WithLabelValues(transportNames[t], k.String(), tenant, outcomeNames[o]).Inc()
	if bodyBytes > 0 {
		m.bytes[t][k].Add(float64(bodyBytes))
	}
	m.latency[t][k].Observe(time.Since(start).Seconds())
}
