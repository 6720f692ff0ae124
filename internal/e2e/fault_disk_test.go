//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// mountTmpfs mounts a tmpfs of size bytes and unmounts it when the test
// ends (after the server, registered later, is stopped). It needs root.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		corpustest.Missing(t, "root, to mount a small tmpfs for the disk-full test")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		corpustest.Missing(t, fmt.Sprintf("permission to mount a tmpfs (%v: %s)", err, bytes.TrimSpace(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// padSender sends logs whose records carry a unique seq and an
// incompressible pad, so that the lake grows about as fast as the queue.
// It records acknowledgements in g and every refusal's status and
// Retry-After.
type padSender struct {
	g        *loadGen
	pad      int
	mu       sync.Mutex
	statuses map[int]int
	noRetry  atomic.Int64 // refusals without Retry-After
	lastAck  atomic.Int64 // unix ns
}

func (s *padSender) body(t testing.TB, first int64) []byte {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "diskfill")
	sl := rl.ScopeLogs().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Now())
	raw := make([]byte, s.pad/2)
	for i := range int64(s.g.perReq) {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(now)
		rand.Read(raw)
		r.Body().SetStr(hex.EncodeToString(raw))
		r.Attributes().PutInt("seq", first+i)
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *padSender) send(t testing.TB, ctx context.Context, client *http.Client, addr string) bool {
	g := s.g
	first := g.next.Add(int64(g.perReq)) - int64(g.perReq)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/logs", bytes.NewReader(s.body(t, first)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Scope-OrgID", "load")
	g.sent.Add(1)
	resp, err := client.Do(req)
	if err != nil {
		g.failed.Add(1)
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s.mu.Lock()
	s.statuses[resp.StatusCode]++
	s.mu.Unlock()
	if resp.StatusCode != http.StatusOK {
		g.refused.Add(1)
		if resp.Header.Get("Retry-After") == "" {
			s.noRetry.Add(1)
		}
		return false
	}
	g.mu.Lock()
	for i := range int64(g.perReq) {
		g.acked[first+i] = true
	}
	g.mu.Unlock()
	s.lastAck.Store(time.Now().UnixNano())
	return true
}

func (s *padSender) run(t testing.TB, ctx context.Context, addr string, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if !s.send(t, ctx, client, addr) {
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	return &wg
}

func (s *padSender) count(code int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[code]
}

func readyz(t *testing.T, admin string) (int, string) {
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitFor polls cond every 100ms until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestFaultDiskFullRecovers runs `sluice run` with its lake and queue on a
// 64 MiB tmpfs, most of it taken by a filler file. Under continuous load
// ingestion is refused (429 with Retry-After) before the disk is full and
// /readyz says why; once the filler is deleted, ingestion and the lake
// recover by themselves under the same load, and every acknowledged record
// is in the lake exactly once.
func TestFaultDiskFullRecovers(t *testing.T) {
	mnt := mountTmpfs(t, 64<<20)
	lakeDir := filepath.Join(mnt, "lake")
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 36<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	const minFree = 12 << 20
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
    max_request_bytes: 256KiB
admin:
  addr: 127.0.0.1:0
query:
  addr: ""
upkeep:
  enabled: false
queue:
  segment_bytes: 1MiB
  max_bytes: 48MiB
  min_free_bytes: %d
lake:
  root: %s
  flush_interval: 2s
  checkpoint_queue_bytes: 4MiB
shutdown_timeout: %s
`, minFree, lakeDir, runShutdownTimeout)
	cfgPath := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfgPath)

	g := newLoadGen(20)
	load := &padSender{g: g, pad: 2048, statuses: map[int]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg := load.run(t, ctx, s.http, 4)

	// 1. The disk fills up to the headroom: refusals, /readyz 503.
	var code int
	var why string
	if !waitFor(60*time.Second, func() bool {
		code, why = readyz(t, s.admin)
		return load.count(http.StatusTooManyRequests) > 20 && code == http.StatusServiceUnavailable
	}) {
		t.Fatalf("no refusals for disk space: statuses %v, readyz %d %q, %d bytes free\n%s",
			load.statuses, code, why, freeBytes(t, mnt), s.stderr)
	}
	if !strings.Contains(why, "queue.min_free_bytes") {
		t.Errorf("readyz while refusing: %q, want the reason naming queue.min_free_bytes", why)
	}
	refusedAt := freeBytes(t, mnt)
	ackedBefore := g.ackedCount()
	t.Logf("refusing with %d bytes free after %d records acknowledged; statuses %v", refusedAt, ackedBefore, load.statuses)
	time.Sleep(2 * time.Second) // stay refused under load for a while
	if free := freeBytes(t, mnt); free < minFree/2 {
		t.Errorf("free space went down to %d under refusals, headroom %d", free, minFree)
	}

	// 2. Free space: everything recovers under the same load.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	if !waitFor(60*time.Second, func() bool {
		code, why = readyz(t, s.admin)
		return code == http.StatusOK && load.lastAck.Load() > freed.UnixNano()
	}) {
		t.Fatalf("no recovery within 60s of freeing space: readyz %d %q, statuses %v\n%s", code, why, load.statuses, s.stderr)
	}
	recovered := time.Since(freed)
	ackedAtRecovery := g.ackedCount()
	time.Sleep(3 * time.Second) // more load after recovery, the lake keeps checkpointing
	cancel()
	wg.Wait()
	if g.ackedCount() <= ackedAtRecovery {
		t.Errorf("no acknowledgements after recovery")
	}
	if n := load.noRetry.Load(); n > 0 {
		t.Errorf("%d refusals without Retry-After", n)
	}
	if n := load.count(http.StatusServiceUnavailable) + load.count(http.StatusInsufficientStorage); n > 0 {
		t.Errorf("%d answers 503/507: the disk was really full (statuses %v)", n, load.statuses)
	}
	if strings.Contains(s.stderr.String(), "no space left on device") {
		t.Errorf("something hit ENOSPC: the headroom did not keep the disk from filling:\n%s", grepLines(s.stderr.String(), "no space left"))
	}

	// The refusals woke the lake loop for early checkpoints.
	if n := metricValue(t, s.admin, `sluice_lake_checkpoints_total{reason="disk"}`); n < 1 {
		t.Errorf("no checkpoint with reason disk after refusals for disk space")
	}
	if n := metricValue(t, s.admin, `sluice_queue_low_disk_refusals_total`); n < 1 {
		t.Errorf("sluice_queue_low_disk_refusals_total = %v after refusals", n)
	}

	// 3. Nothing acknowledged is lost or doubled.
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, runShutdownTimeout+10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
	}
	acked, found, dups := checkLake(t, lakeDir, g)
	t.Logf("disk full: refused at %d bytes free (headroom %d), recovered %v after freeing space; statuses %v; acknowledged %d, found %d, duplicates %d",
		refusedAt, minFree, recovered.Round(100*time.Millisecond), load.statuses, acked, found, dups)
	if found < acked || dups != 0 {
		t.Errorf("acknowledged %d, found %d distinct, %d duplicates", acked, found, dups)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	if len(out) > 10 {
		out = out[:10]
	}
	return strings.Join(out, "\n")
}
