package otlpexporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

func corpusLogs(t *testing.T) [][]byte {
	t.Helper()
	files, _ := filepath.Glob("/work/shared/corpus/otlp/logs/*.binpb*")
	if len(files) == 0 {
		t.Fatal("no OTLP logs corpus")
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Ext(f) == ".gz" {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(zr)
		}
		out = append(out, b)
	}
	return out
}

func countLogs(t *testing.T, body []byte) int {
	var l signal.Logs
	if err := otlp.DecodeLogs(&l, body); err != nil {
		t.Errorf("downstream got an undecodable body: %v", err)
		return 0
	}
	return l.Len()
}

// Records go from the queue through a Runner and the HTTP exporter into a
// real HTTP server that fails the first requests: every log record arrives
// (batches concatenate requests), and the cursor commits past them.
func TestHTTPExporterDeliversThroughRetries(t *testing.T) {
	for _, comp := range []string{"gzip", "zstd", "none"} {
		t.Run(comp, func(t *testing.T) {
			bodies := corpusLogs(t)
			want := 0
			for _, b := range bodies {
				want += countLogs(t, b)
			}
			var got, calls atomic.Int64
			var mu sync.Mutex
			tenants := map[string]bool{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= 2 {
					w.WriteHeader(503)
					return
				}
				if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
					w.WriteHeader(404)
					return
				}
				var rd io.Reader = r.Body
				switch r.Header.Get("Content-Encoding") {
				case "gzip":
					rd, _ = gzip.NewReader(r.Body)
				case "zstd":
					zr, _ := zstd.NewReader(r.Body)
					defer zr.Close()
					rd = zr
				}
				b, _ := io.ReadAll(rd)
				got.Add(int64(countLogs(t, b)))
				mu.Lock()
				tenants[r.Header.Get("X-Scope-OrgID")] = true
				mu.Unlock()
				w.WriteHeader(200)
			}))
			defer srv.Close()

			q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 4 << 20, MaxBytes: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			q.Release(queue.MaxPosition)
			cur, err := q.OpenCursor("otlp", queue.CursorOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bodies {
				if _, err := q.Append(append([]byte{byte(signal.KindLogs)}, b...)); err != nil {
					t.Fatal(err)
				}
			}
			exp, err := New(Config{Endpoints: []string{srv.URL}, Protocol: "http", Compression: comp, TenantHeader: "X-Scope-OrgID",
				Policy: sending.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := exporter.New(exporter.Options{Name: "otlp", Cursor: cur, Sender: exp, BatchDelay: 20 * time.Millisecond,
				Parse: func(rec []byte) (exporter.Record, error) {
					return exporter.Record{Kind: signal.Kind(rec[0]), Tenant: "t1", Body: rec[1:]}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- r.Run(ctx) }()
			deadline := time.Now().Add(10 * time.Second)
			for cur.Committed() < q.Stats().Last && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := waittest.Recv(t, done, "Run to end once cancelled"); err != nil {
				t.Fatal(err)
			}
			if got.Load() != int64(want) || !tenants["t1"] {
				t.Fatalf("downstream got %d log records of %d (tenants %v)", got.Load(), want, tenants)
			}
			ep := exp.Endpoints()[0]
			if ep.Stats.Retried.Load() != 2 {
				t.Fatalf("retried %d, want 2", ep.Stats.Retried.Load())
			}
			if st := r.Stats(); st.SentRecords != uint64(len(bodies)) || st.Cursor.LagBytes != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// A gRPC endpoint answering RESOURCE_EXHAUSTED with a RetryInfo of 1.5s
// (what sluice's receiver sends under backpressure) is retried no sooner
// than that, although the policy's backoff is 1ms; then it is delivered.
func TestGRPCRetryInfoHonoured(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var m []byte
		if err := stream.RecvMsg(&m); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		times = append(times, time.Now())
		if len(times) == 1 {
			st, _ := status.New(codes.ResourceExhausted, "queue full").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
			return st.Err()
		}
		return stream.SendMsg([]byte{})
	}), grpc.ForceServerCodecV2(rawCodec{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()
	e, err := New(Config{Endpoints: []string{ln.Addr().String()}, Protocol: "grpc", Compression: "none",
		Policy: sending.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindLogs, Body: corpusLogs(t)[0]}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 2 {
		t.Fatalf("%d attempts, want 2", len(times))
	}
	if d := times[1].Sub(times[0]); d < 1500*time.Millisecond {
		t.Fatalf("retried %v after a RetryInfo of 1.5s", d)
	}
	if r := e.Endpoints()[0].Stats.Retried.Load(); r != 1 {
		t.Fatalf("retried %d, want 1", r)
	}
}

// An OTLP endpoint that accepts a request but refuses part of it (partial
// success: rejected records and a message, over HTTP and over gRPC) gets
// it once, not again: the refused records are counted per endpoint and
// the answer logged.
func TestPartialSuccessCounted(t *testing.T) {
	resp := plogotlp.NewExportResponse()
	resp.PartialSuccess().SetRejectedLogRecords(3)
	resp.PartialSuccess().SetErrorMessage("3 records too old")
	answer, err := resp.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(answer)
	}))
	defer hs.Close()
	gs := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var m []byte
		if err := stream.RecvMsg(&m); err != nil {
			return err
		}
		calls.Add(1)
		return stream.SendMsg(answer)
	}), grpc.ForceServerCodecV2(rawCodec{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	for _, cfg := range []Config{{Endpoints: []string{hs.URL}, Protocol: "http", Compression: "gzip"},
		{Endpoints: []string{ln.Addr().String()}, Protocol: "grpc", Compression: "gzip"}} {
		calls.Store(0)
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindLogs, Body: corpusLogs(t)[0]}}); err != nil {
			t.Fatal(err)
		}
		e.Close()
		st := &e.Endpoints()[0].Stats
		if calls.Load() != 1 || st.Rejected.Load() != 3 || st.Sent.Load() != 1 || st.Retried.Load() != 0 {
			t.Fatalf("%s: %d calls, rejected %d, sent %d, retried %d; want 1, 3, 1, 0", cfg.Protocol, calls.Load(), st.Rejected.Load(), st.Sent.Load(), st.Retried.Load())
		}
	}
	if n, msg := partialSuccess([]byte{0x0a, 0xff}); n != 0 || msg != "" {
		t.Fatalf("a truncated answer read as %d, %q", n, msg)
	}
}

// tooLargeRecords are the corpus' log requests, and one record of them
// all concatenated (one request of every record) that no endpoint below
// takes whole: limit fits the largest of the others.
func tooLargeRecords(t *testing.T) (recs []exporter.Record, limit, want int) {
	bodies := corpusLogs(t)
	var all []byte
	for _, b := range bodies {
		recs = append(recs, exporter.Record{Kind: signal.KindLogs, Body: b})
		limit = max(limit, len(b))
		want += countLogs(t, b)
		all = append(all, b...)
	}
	recs = append(recs[:len(recs)/2:len(recs)/2], append([]exporter.Record{{Kind: signal.KindLogs, Body: all}}, recs[len(recs)/2:]...)...)
	return recs, limit, want
}

// An OTLP endpoint that refuses a request for its size (HTTP 413 from a
// body limit; gRPC's RESOURCE_EXHAUSTED of a message over the server's
// max) gets the records again in halves: every record that fits alone
// arrives once, the one too large alone is dropped and counted, and Send
// returns nil. Before, HTTP dropped the whole request and gRPC retried it
// for ever.
func TestTooLargeSplitByRecords(t *testing.T) {
	recs, limit, want := tooLargeRecords(t)
	if len(recs) < 3 {
		t.Fatalf("%d corpus records: too few to split", len(recs))
	}
	var got atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		got.Add(int64(countLogs(t, b)))
	}))
	defer hs.Close()
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(limit), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var m []byte
		if err := stream.RecvMsg(&m); err != nil {
			return err
		}
		got.Add(int64(countLogs(t, m)))
		return stream.SendMsg([]byte{})
	}), grpc.ForceServerCodecV2(rawCodec{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	for _, c := range []struct{ proto, ep string }{{"http", hs.URL}, {"grpc", ln.Addr().String()}} {
		t.Run(c.proto, func(t *testing.T) {
			got.Store(0)
			e, err := New(Config{Endpoints: []string{c.ep}, Protocol: c.proto, Compression: "none",
				Policy: sending.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := e.Send(ctx, recs); err != nil {
				t.Fatalf("Send: %v", err)
			}
			st := &e.Endpoints()[0].Stats
			if got.Load() != int64(want) || st.Dropped.Load() != 1 || st.Splits.Load() == 0 {
				t.Fatalf("downstream got %d log records of %d; %d requests dropped (want 1), %d splits", got.Load(), want, st.Dropped.Load(), st.Splits.Load())
			}
		})
	}
}
