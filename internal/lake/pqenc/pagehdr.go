package pqenc

import (
	"bytes"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// pageHeaderEncoder encodes page headers into a buffer it reuses:
// thrift.Marshal allocates a buffer, a writer and an encoder per call,
// page after page (dictionary pages of DictPageRows rows made them many).
// The bytes are thrift.Marshal's: the same encoder over the same protocol,
// whose writer keeps no state between values.
type pageHeaderEncoder struct {
	buf bytes.Buffer
	enc *thrift.Encoder
	at  *bytes.Buffer // the buffer enc writes to: buf where enc was made
}

// header returns h encoded, valid until the next call.
func (c *Column) header(h *format.PageHeader) ([]byte, error) {
	e := &c.hdr
	if e.enc == nil || e.at != &e.buf {
		// First use, or the Column moved (a slice of them grew): enc
		// would write to the buffer where it was made.
		e.enc, e.at = thrift.NewEncoder(c.proto.NewWriter(&e.buf)), &e.buf
	}
	e.buf.Reset()
	if err := e.enc.Encode(h); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}
