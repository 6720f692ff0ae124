//go:build unix

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// raiseNoFile lifts the soft RLIMIT_NOFILE to the hard one (the sluice
// child inherits it) and fails if that is still below need.
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if lim.Cur < need {
		t.Fatalf("RLIMIT_NOFILE is %d, the test needs %d open files", lim.Cur, need)
	}
}

// trickle opens a connection with a valid request head declaring a 1 MB
// body and sends 4 bytes every 200 ms, reconnecting whenever it is cut;
// it counts the statuses it gets.
func trickle(ctx context.Context, addr string, statuses *sync.Map) {
	for ctx.Err() == nil {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		fmt.Fprintf(conn, "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nX-Scope-OrgID: load\r\nContent-Length: 1000000\r\n\r\n")
		done := make(chan int, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				done <- -1
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	loop:
		for {
			select {
			case code := <-done:
				v, _ := statuses.LoadOrStore(code, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
				break loop
			case <-ctx.Done():
				break loop
			case <-time.After(200 * time.Millisecond):
				_, _ = conn.Write([]byte("\x0a\x02ab"))
			}
		}
		conn.Close()
	}
}

// silentStreams opens n OTLP export streams on cc that never send a
// message, reopening each when the server ends it.
func silentStreams(ctx context.Context, cc *grpc.ClientConn, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				s, err := cc.NewStream(ctx, desc, "/opentelemetry.proto.collector.logs.v1.LogsService/Export")
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				_ = s.RecvMsg(new(plogotlp.ExportResponse)) // until the server ends it
			}
		})
	}
	return &wg
}

// metricValue reads one sample from /metrics text.
func metricValue(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestFaultSlowClients: 250 clients trickling HTTP bodies and 250 gRPC
// streams that never send hang on to a `sluice run` with the default 32
// processing slots, reconnecting whenever they are cut. A well-behaved
// client sending over both transports meanwhile gets 200 / OK for every
// request with bounded latency, its records all reach the lake, and the
// slow clients are cut and counted.
func TestFaultSlowClients(t *testing.T) {
	if testing.Short() {
		t.Skip("500 connections for several seconds")
	}
	raiseNoFile(t, 4000)
	lakeDir := t.TempDir()
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
    body_rate_grace: 1s
    read_timeout: 3s
admin:
  addr: 127.0.0.1:0
query:
  addr: ""
upkeep:
  enabled: false
lake:
  root: %s
  flush_interval: 1s
shutdown_timeout: %s
`, lakeDir, runShutdownTimeout)
	cfgPath := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfgPath)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var slow sync.WaitGroup
	var statuses sync.Map
	for range 250 {
		slow.Go(func() { trickle(ctx, s.http, &statuses) })
	}
	var conns []*grpc.ClientConn
	for range 25 {
		cc, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cc)
		streams := silentStreams(ctx, cc, 10)
		slow.Go(streams.Wait)
	}
	time.Sleep(1500 * time.Millisecond) // all connected, the first cuts happened

	g := newLoadGen(20)
	client := &http.Client{Timeout: 10 * time.Second}
	fast, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	exporter := plogotlp.NewGRPCClient(fast)
	var lat []time.Duration
	failures := 0
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end) && failures < 5; time.Sleep(20 * time.Millisecond) {
		start := time.Now()
		if !g.send(t, context.Background(), client, s.http) {
			failures++
			t.Errorf("fast HTTP request refused or failed")
		}
		lat = append(lat, time.Since(start))

		first := g.next.Add(int64(g.perReq)) - int64(g.perReq)
		req := plogotlp.NewExportRequest()
		if err := req.UnmarshalProto(g.body(t, first)); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		gctx, gcancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "load"), 10*time.Second)
		_, err := exporter.Export(gctx, req)
		gcancel()
		lat = append(lat, time.Since(start))
		if err != nil {
			failures++
			t.Errorf("fast gRPC request: %v", err)
			continue
		}
		g.mu.Lock()
		for i := range int64(g.perReq) {
			g.acked[first+i] = true
		}
		g.mu.Unlock()
	}
	cancel()
	for _, cc := range conns {
		cc.Close()
	}
	slow.Wait()

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99, worst := lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	if p99 > time.Second {
		t.Errorf("fast client p99 latency %v, want under 1s", p99)
	}
	var cut408 int64
	statuses.Range(func(k, v any) bool {
		t.Logf("slow HTTP clients: status %v %d times", k, v.(*atomic.Int64).Load())
		if k.(int) == http.StatusRequestTimeout {
			cut408 = v.(*atomic.Int64).Load()
		}
		return true
	})
	slowHTTP := metricValue(t, s.admin, `sluice_receiver_slow_clients_total{transport="http"}`)
	slowGRPC := metricValue(t, s.admin, `sluice_receiver_slow_clients_total{transport="grpc"}`)
	if cut408 < 250 || slowHTTP < 250 {
		t.Errorf("slow HTTP bodies cut: %v counted, %d saw 408; want all 250 at least once", slowHTTP, cut408)
	}
	if slowGRPC < 250 {
		t.Errorf("silent gRPC streams cut: %v, want all 250 at least once", slowGRPC)
	}

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, runShutdownTimeout+10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
	}
	acked, found, dups := checkLake(t, lakeDir, g)
	t.Logf("slow clients: fast client %d requests, p50 %v, p99 %v, max %v, %d failed; cut %v HTTP bodies, %v gRPC streams; acknowledged %d, found %d, duplicates %d",
		len(lat), p50, p99, worst, failures, slowHTTP, slowGRPC, acked, found, dups)
}
