package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// replayTarget is set by scripts/bench-e2e.sh (GEN=replay): the test binary
// then serves only as a load generator and TestMain builds nothing.
const replayTarget = "SLUICE_BENCH_E2E_TARGET"

// bytesCodec sends pre-encoded request bodies as they are and ignores
// the answers, so that the generator spends its CPU on sending only.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "proto" }
func (bytesCodec) Marshal(v any) ([]byte, error) {
	return *v.(*[]byte), nil
}
func (bytesCodec) Unmarshal([]byte, any) error { return nil }

// replayBody is one OTLP logs export request shaped like telemetrygen's:
// one resource (service.name), one scope, n records with the body "the
// message", severity Info and one attribute.
func replayBody(tb testing.TB, n int, ts time.Time) []byte {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "telemetrygen")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("telemetrygen")
	for i := range n {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(pcommon.NewTimestampFromTime(ts.Add(time.Duration(i) * time.Microsecond)))
		r.SetObservedTimestamp(r.Timestamp())
		r.SetSeverityNumber(plog.SeverityNumberInfo)
		r.SetSeverityText("Info")
		r.Body().SetStr("the message")
		r.Attributes().PutStr("app", "server")
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func envInt(tb testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// TestReplayLoad is the load generator of `GEN=replay scripts/bench-e2e.sh`:
// it sends SLUICE_BENCH_E2E_LOGS logs in requests of SLUICE_BENCH_E2E_BATCH
// over OTLP/gRPC from SLUICE_BENCH_E2E_WORKERS concurrent streams, as fast as
// sluice acknowledges them. It is far cheaper per log than telemetrygen (the
// bodies are encoded once), so the sluice process, not the generator, is
// what limits the rate. Skipped unless SLUICE_BENCH_E2E_TARGET is set.
func TestReplayLoad(t *testing.T) {
	target := os.Getenv(replayTarget)
	if target == "" {
		t.Skip("load generator of scripts/bench-e2e.sh (GEN=replay); set " + replayTarget)
	}
	logs := envInt(t, "SLUICE_BENCH_E2E_LOGS", 1_000_000)
	batch := envInt(t, "SLUICE_BENCH_E2E_BATCH", 100)
	workers := envInt(t, "SLUICE_BENCH_E2E_WORKERS", 8)
	requests := logs / batch

	bodies := make([][]byte, 64)
	now := time.Now()
	for i := range bodies {
		bodies[i] = replayBody(t, batch, now.Add(time.Duration(i)*time.Millisecond))
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(bytesCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", "bench")

	var next, retries atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(requests) || ctx.Err() != nil {
					return
				}
				body := bodies[i%int64(len(bodies))]
				// Backpressure (queue full) is answered with a retryable
				// status; retry a bounded number of times.
				var err error
				for attempt := 0; attempt < 100 && ctx.Err() == nil; attempt++ {
					if err = conn.Invoke(ctx, "/opentelemetry.proto.collector.logs.v1.LogsService/Export", &body, new(int)); err == nil {
						break
					}
					retries.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if p := firstErr.Load(); p != nil {
		t.Fatalf("export: %v", *p)
	}
	sent := requests * batch
	// The script reads this line.
	fmt.Printf("replay: sent %d logs in %d requests of %d (%d bytes each) from %d streams in %.3f s (%.0f logs/s), %d retries\n",
		sent, requests, batch, len(bodies[0]), workers, took.Seconds(), float64(sent)/took.Seconds(), retries.Load())
}
