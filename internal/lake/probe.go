package lake

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Probe tells a batch the writer cannot encode (a poison record) from a
// failing store: it encodes the batch as a Writer with opts would, into
// nothing, and returns the encoding error, if any. Store and Root in opts
// are ignored; nothing is written.
type Probe struct {
	opts Options
	w    *Writer
}

// NewProbe returns a Probe for writers with opts.
func NewProbe(opts Options) (*Probe, error) {
	opts.Store, opts.Root = discardStore{}, ""
	w, err := NewWriter(opts, nil)
	if err != nil {
		return nil, err
	}
	return &Probe{opts: opts, w: w}, nil
}

// Logs reports whether the writer could encode b for tenant.
func (p *Probe) Logs(tenant string, b *signal.Logs) error {
	return p.run(func() error { return p.w.WriteLogs(tenant, b) })
}

// Metrics is Logs for data points.
func (p *Probe) Metrics(tenant string, b *signal.Metrics) error {
	return p.run(func() error { return p.w.WriteMetrics(tenant, b) })
}

// Spans is Logs for spans.
func (p *Probe) Spans(tenant string, b *signal.Spans) error {
	return p.run(func() error { return p.w.WriteSpans(tenant, b) })
}

func (p *Probe) run(write func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("lake: writer panic: %v", r)
		}
		if err != nil {
			// A failed writer may keep partitions half done: start over.
			p.w, _ = NewWriter(p.opts, nil)
		}
	}()
	if err := write(); err != nil {
		return err
	}
	return p.w.Flush()
}

// discardStore is a Store whose objects vanish; Probe writes to it.
type discardStore struct{}

type discardWriter struct{}

func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) Commit() error               { return nil }
func (discardWriter) Abort() error                { return nil }

func (discardStore) Create(string) (ObjectWriter, error) { return discardWriter{}, nil }
func (discardStore) Open(p string) (ObjectReader, error) {
	return nil, fmt.Errorf("lake: probe store has no object %q", p)
}
func (discardStore) Remove(string) error                                 { return nil }
func (discardStore) Walk(string, func(p string, size int64) error) error { return nil }
