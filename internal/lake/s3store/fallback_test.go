package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
)

// A server without conditional writes answers If-None-Match with 501; the
// store then checks for the object first, and still refuses to overwrite.
func TestNoConditionalWriteFallback(t *testing.T) {
	srv := s3test.Start(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "" && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotImplemented)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented.</Message></Error>`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()

	bucket := srv.Bucket(t)
	cfg := srv.Config(bucket)
	cfg.Endpoint, cfg.PartSize = front.URL, s3store.MinPartSize
	st, err := s3store.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, "t/a.parquet", []byte("first"))
	put(t, st, "t/big.parquet", randomBytes(s3store.MinPartSize+1, 6))
	if refused.Load() == 0 {
		t.Fatal("the proxy saw no conditional write")
	}
	for _, size := range []int{3, s3store.MinPartSize + 2} {
		w, err := st.Create("t/a.parquet")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(randomBytes(size, 7)); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); !errors.Is(err, s3store.ErrExists) {
			t.Fatalf("size %d: overwrite: %v", size, err)
		}
	}
	if got := readAll(t, st, "t/a.parquet"); !bytes.Equal(got, []byte("first")) {
		t.Fatalf("overwritten: %q", got)
	}
	if got := readAll(t, st, "t/big.parquet"); len(got) != s3store.MinPartSize+1 {
		t.Fatalf("big: %d bytes", len(got))
	}
}
