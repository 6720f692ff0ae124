package otlpreceiver

import (
	"net"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// limitListener bounds the connections open at once on one listener. One
// over the bound is accepted and closed at once, not left in the backlog:
// a client that cannot connect retries elsewhere, and the process keeps
// file descriptors for the queue and the lake however many sockets
// clients open (a lake writer that cannot open files stops the lake).
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
		l.gauge.Inc()
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
		c.l.gauge.Dec()
	}
	return c.Conn.Close()
}
