package prwexporter

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// bodyConn is the exporter's connection to an endpoint: a net.Conn that
// writes a request body in one system call. net/http copies a body of
// known length (every request of ours) through an io.LimitedReader, which
// hides the body's WriterTo: after the transport's write buffer, the rest
// went to the socket in 32 KiB writes, each from a 32 KiB buffer allocated
// per request (a quarter-megabyte pass-through request was seven writes,
// and those buffers half of the relay's allocated bytes). ReadFrom, which
// the transport calls with that limited reader, writes what remains of a
// body of newRequest with one Write when the limit is exactly its rest;
// anything else is copied as before.
type bodyConn struct{ net.Conn }

// ReadFrom implements io.ReaderFrom.
func (c bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if b, ok := lr.R.(*body); ok && int64(len(b.rest)) == lr.N {
			n, err := b.WriteTo(c.Conn)
			lr.N -= n
			return n, err
		}
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r) // a *net.TCPConn: splice, sendfile or its own copy
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// body is a request body of newRequest: the payload, read once.
type body struct{ rest []byte }

func (b *body) Read(p []byte) (int, error) {
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// WriteTo implements io.WriterTo: the rest in one Write.
func (b *body) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b.rest)
	b.rest = b.rest[n:]
	return int64(n), err
}

func (b *body) Close() error { return nil }

// newRequest is a POST of payload to url whose body bodyConn writes in one
// call (http.NewRequest would wrap a bytes.Reader where ReadFrom cannot
// see its length).
func newRequest(ctx context.Context, url string, payload []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	req.Body = &body{payload}
	req.ContentLength = int64(len(payload))
	req.GetBody = func() (io.ReadCloser, error) { return &body{payload}, nil }
	return req, nil
}

// dialBodyConn is the transport's DialContext: the default transport's
// dialer, its connections wrapped in bodyConn.
func dialBodyConn() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return bodyConn{c}, nil
	}
}
