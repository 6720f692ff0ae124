package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// vmagentBin finds Debian's vmagent (package victoria-metrics; make test
// installs it), or $SLUICE_VMAGENT.
func vmagentBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SLUICE_VMAGENT"); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("vmagent")
	if err != nil {
		corpustest.Missing(t, "vmagent (Debian package victoria-metrics; make test installs it)")
	}
	return bin
}

// startVMAgent runs vmagent on a free loopback port, remote-writing to
// each of urls, and waits until it answers.
func startVMAgent(t *testing.T, urls ...string) (base string, stderr *lockedBuffer) {
	t.Helper()
	bin := vmagentBin(t)
	addr := freePort(t)
	args := []string{"-httpListenAddr=" + addr, "-remoteWrite.tmpDataPath=" + t.TempDir(),
		"-remoteWrite.flushInterval=200ms", "-loggerLevel=ERROR"}
	for _, u := range urls {
		args = append(args, "-remoteWrite.url="+u)
	}
	cmd := exec.Command(bin, args...)
	stderr = &lockedBuffer{}
	cmd.Stderr, cmd.Stdout = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base = "http://" + addr
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base, stderr
			}
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("vmagent did not become ready:\n%s", stderr)
		}
	}
}

// vmImport pushes Prometheus text lines (with millisecond timestamps) into
// vmagent, which relays them by remote write.
func vmImport(t *testing.T, base, lines string) {
	t.Helper()
	resp, err := http.Post(base+"/api/v1/import/prometheus", "text/plain", strings.NewReader(lines))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("vmagent import: %s", resp.Status)
	}
}

// vmLoad is a deterministic load for vmagent: series with 3 to 6 labels,
// values that need every bit of a float64 (and an integer counter), one
// sample per 15 s, as Prometheus text with timestamps.
type vmLoad struct {
	t0     int64 // ms
	series int
	points int
	want   map[string][][2]string // series key -> (timestamp s, value)
}

func newVMLoad(t0 int64, series, points int) *vmLoad {
	l := &vmLoad{t0: t0, series: series, points: points, want: map[string][][2]string{}}
	return l
}

func (l *vmLoad) text() string {
	var b strings.Builder
	for s := range l.series {
		name := "vm_load_gauge"
		labels := [][2]string{{"pod", fmt.Sprintf("p-%d", s)}, {"zone", fmt.Sprintf("z%d", s%3)}, {"path", fmt.Sprintf("/api/v%d/x y", s%4)}}
		if s%2 == 1 {
			name = "vm_load_requests_total"
			labels = [][2]string{{"pod", fmt.Sprintf("p-%d", s)}, {"code", fmt.Sprint(200 + s%5)}}
		}
		m := map[string]string{"__name__": name}
		var text []string
		for _, kv := range labels {
			m[kv[0]] = kv[1]
			text = append(text, fmt.Sprintf("%s=%q", kv[0], kv[1]))
		}
		key := seriesKey(m)
		for j := range l.points {
			ts := l.t0 + int64(j)*15000
			v := float64(s*1000+j) + 1.0/3
			if s%2 == 1 {
				v = float64(s + j*7)
			}
			fmt.Fprintf(&b, "%s{%s} %s %d\n", name, strings.Join(text, ","), strconv.FormatFloat(v, 'g', -1, 64), ts)
			l.want[key] = append(l.want[key], [2]string{strconv.FormatFloat(float64(ts)/1000, 'f', -1, 64), strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	return b.String()
}

// check compares a range selector's answer from base with the load,
// series by series and sample by sample. It reports the first difference.
// vmagent adds no labels to pushed data; job and instance would be
// vmagent's own and are refused as differences too.
func (l *vmLoad) check(t *testing.T, base string) (ok bool, why string) {
	at := time.UnixMilli(l.t0 + int64(l.points)*15000)
	got := promMatrix(t, base, fmt.Sprintf(`{__name__=~"vm_load_.*"}[%ds]`, l.points*15+1), at)
	if len(got) != l.series {
		return false, fmt.Sprintf("%d series, want %d", len(got), l.series)
	}
	for _, s := range got {
		key := seriesKey(s.Metric)
		want, sent := l.want[key]
		if !sent {
			return false, fmt.Sprintf("series %s was never sent", key)
		}
		if len(s.Values) != len(want) {
			return false, fmt.Sprintf("%s: %d samples, want %d", key, len(s.Values), len(want))
		}
		for i, v := range s.Values {
			ts := strconv.FormatFloat(v[0].(float64), 'f', -1, 64)
			if ts != want[i][0] || v[1].(string) != want[i][1] {
				return false, fmt.Sprintf("%s sample %d: (%s, %s), want (%s, %s)", key, i, ts, v[1], want[i][0], want[i][1])
			}
		}
	}
	return true, ""
}

// TestVMAgentRemoteWritesToSluice: Debian's real vmagent (1.79) relays a
// load pushed into it to a real `sluice run` by remote write 1.0 (as
// vmagent sends it: snappy, its own batching). Every series comes back from
// sluice's PromQL API with exactly its name and labels (no suffix added,
// nothing renamed), and every sample with its exact timestamp and value.
func TestVMAgentRemoteWritesToSluice(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	vm, vmerr := startVMAgent(t, "http://"+qaddr+"/api/v1/write")

	load := newVMLoad(time.Now().Add(-20*time.Minute).Truncate(time.Second).UnixMilli(), 40, 30)
	vmImport(t, vm, load.text())

	var why string
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(300 * time.Millisecond) {
		var ok bool
		if ok, why = load.check(t, "http://"+qaddr); ok {
			t.Logf("%d series × %d samples arrived through vmagent exactly", load.series, load.points)
			return
		}
	}
	t.Fatalf("sluice never had vmagent's load exactly: %s\nvmagent:\n%s", why, vmerr)
}

// TestSluiceRemoteWritesToVMAgent: sluice's remote-write 1.0 exporter
// forwards into a real vmagent, which relays to a second sluice. What the
// second sluice answers is exactly what the first one received: vmagent, a
// strict third-party receiver, accepts what the exporter sends.
func TestSluiceRemoteWritesToVMAgent(t *testing.T) {
	downLake, downQuery := t.TempDir(), freePort(t)
	startServer(t, freshConfig(t, downLake, downQuery))
	vm, vmerr := startVMAgent(t, "http://"+downQuery+"/api/v1/write")

	dir := t.TempDir()
	upQuery := freePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
query: {addr: %s}
lake: {root: %s}
queue: {dir: %s}
exporters:
  prometheus_remote_write/vm:
    endpoints: [%s/api/v1/write]
    batch_delay: 20ms
pipelines:
  metrics: {receivers: [prometheus_remote_write], exporters: [lake, prometheus_remote_write/vm]}
shutdown_timeout: %s
`, upQuery, filepath.Join(dir, "lake"), filepath.Join(dir, "queue"), vm, runShutdownTimeout))
	startServer(t, cfg)

	// Push into the first sluice through a second vmagent: both directions
	// of sluice's remote write meet vmagent.
	in, inerr := startVMAgent(t, "http://"+upQuery+"/api/v1/write")
	load := newVMLoad(time.Now().Add(-20*time.Minute).Truncate(time.Second).UnixMilli(), 30, 20)
	vmImport(t, in, load.text())

	var why string
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(300 * time.Millisecond) {
		okUp, whyUp := load.check(t, "http://"+upQuery)
		okDown, whyDown := load.check(t, "http://"+downQuery)
		if okUp && okDown {
			return
		}
		why = fmt.Sprintf("first sluice: %v %s; second sluice: %v %s", okUp, whyUp, okDown, whyDown)
	}
	t.Fatalf("the load did not arrive exactly on both sides: %s\nvmagent in:\n%s\nvmagent out:\n%s", why, inerr, vmerr)
}
