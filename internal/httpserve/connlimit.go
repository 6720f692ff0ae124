package httpserve

import (
	"errors"
	"net"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxConnections bounds the connections a server Serve runs keeps
// open at once when its caller gives no bound.
const DefaultMaxConnections = 4096

// Limit bounds the connections open at once on ln to max. One over the
// bound is accepted and closed at once, not left in the backlog, and
// counted in refused: a client that cannot connect retries elsewhere, and
// the process keeps file descriptors for the queue and the lake however
// many sockets clients open (a lake writer that cannot open files stops
// the lake). open, when not nil, follows the connections open now.
func Limit(ln net.Listener, max int, refused prometheus.Counter, open prometheus.Gauge) net.Listener {
	return &limitListener{Listener: ln, max: int64(max), refused: refused, gauge: open}
}

type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused prometheus.Counter
	gauge   prometheus.Gauge
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refused.Inc()
			_ = c.Close()
			continue
		}
		if l.gauge != nil {
			l.gauge.Inc()
		}
		return &limitConn{Conn: c, l: l}, nil
	}
}

type limitConn struct {
	net.Conn
	l      *limitListener
	closed atomic.Bool
}

func (c *limitConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
		if c.l.gauge != nil {
			c.l.gauge.Dec()
		}
	}
	return c.Conn.Close()
}

// The connection metrics of the servers Serve runs, by server name.
var (
	connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_http_connections_refused_total",
		Help: "Connections closed at once because the server's max_connections (query.max_connections, receivers.prometheus_remote_write.max_connections) were open.",
	}, []string{"server"})
	connsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_http_connections_open",
		Help: "Connections open now on the server.",
	}, []string{"server"})
)

// RegisterMetrics registers the connection metrics of the servers Serve
// runs on reg; registering them again on the same registry, or on none
// (nil), is a no-op.
func RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{connsRefused, connsOpen} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}
