package ingest

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Three requests of distinct sizes (3 logs, 5 points, 7 spans), so a record
// filed under the wrong signal shows in the counts.
func fileExporterRequests(t testing.TB) (logs plog.Logs, metrics pmetric.Metrics, traces ptrace.Traces) {
	now := pcommon.NewTimestampFromTime(time.Now())
	logs = plog.NewLogs()
	sl := logs.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for i := range 3 {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(now)
		r.Body().SetStr("line " + string(rune('a'+i)))
	}
	metrics = pmetric.NewMetrics()
	g := metrics.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("temperature")
	gauge := g.SetEmptyGauge()
	for i := range 5 {
		p := gauge.DataPoints().AppendEmpty()
		p.SetTimestamp(now + pcommon.Timestamp(i))
		p.SetDoubleValue(float64(i))
	}
	traces = ptrace.NewTraces()
	ss := traces.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := range 7 {
		s := ss.Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(pcommon.TraceID{1, byte(i + 1)})
		s.SetSpanID(pcommon.SpanID{2, byte(i + 1)})
		s.SetStartTimestamp(now)
		s.SetEndTimestamp(now + 1000)
	}
	return logs, metrics, traces
}

// fileExporterMessages marshals the three requests as the Collector's file
// exporter does for a format ("json" or "proto").
func fileExporterMessages(t testing.TB, format string) [][]byte {
	logs, metrics, traces := fileExporterRequests(t)
	var out [][]byte
	add := func(b []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if format == "json" {
		add((&plog.JSONMarshaler{}).MarshalLogs(logs))
		add((&pmetric.JSONMarshaler{}).MarshalMetrics(metrics))
		add((&ptrace.JSONMarshaler{}).MarshalTraces(traces))
	} else {
		add((&plog.ProtoMarshaler{}).MarshalLogs(logs))
		add((&pmetric.ProtoMarshaler{}).MarshalMetrics(metrics))
		add((&ptrace.ProtoMarshaler{}).MarshalTraces(traces))
	}
	return out
}

// lengthPrefixed frames each message with its length as 4 bytes, big-endian
// (the file exporter's exportMessageAsBuffer).
func lengthPrefixed(msgs [][]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
		b = append(b, m...)
	}
	return b
}

func zstdEach(t testing.TB, msgs [][]byte) [][]byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		out[i] = enc.EncodeAll(m, nil)
	}
	return out
}

func zstdWhole(t testing.TB, b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(b, nil)
}

// TestFileExporterFiles reads every file shape the OpenTelemetry Collector's
// file exporter writes when one exporter serves the logs, metrics and traces
// pipelines: all three signals in one file.
func TestFileExporterFiles(t *testing.T) {
	jsonMsgs, protoMsgs := fileExporterMessages(t, "json"), fileExporterMessages(t, "proto")
	jsonLines := append(bytes.Join(jsonMsgs, []byte("\n")), '\n')
	cases := []struct {
		name    string
		content []byte
	}{
		{"format json (JSON lines)", jsonLines},
		{"format json, concatenated without newlines", bytes.Join(jsonMsgs, nil)},
		{"format proto", lengthPrefixed(protoMsgs)},
		{"format proto, compression zstd (each message)", lengthPrefixed(zstdEach(t, protoMsgs))},
		{"format json, compression zstd (each message)", lengthPrefixed(zstdEach(t, jsonMsgs))},
		{"format proto, native zstd compression", zstdWhole(t, lengthPrefixed(protoMsgs))},
		{"format json, native zstd compression", zstdWhole(t, jsonLines)},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, "out"+string(rune('0'+i)))
			if err := os.WriteFile(p, c.content, 0o644); err != nil {
				t.Fatal(err)
			}
			var sink countingSink
			res, err := Run(context.Background(), []string{p}, &sink, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failed) != 0 {
				t.Fatalf("failed: %v", res.Failed)
			}
			if sink.logs != 3 || sink.points != 5 || sink.spans != 7 {
				t.Errorf("sink got %d logs, %d points, %d spans; want 3, 5, 7", sink.logs, sink.points, sink.spans)
			}
			if res.Logs != 3 || res.DataPoints != 5 || res.Spans != 7 || res.Records != 15 || res.Empty != 0 {
				t.Errorf("result %+v; want 3 logs, 5 points, 7 spans, 15 records", res)
			}
		})
	}
}

// TestFileExporterDamagedFiles: a damaged file is named with its problem and
// contributes nothing, not even the requests before the damage.
func TestFileExporterDamagedFiles(t *testing.T) {
	protoMsgs := fileExporterMessages(t, "proto")
	whole := lengthPrefixed(protoMsgs)
	badMiddle := lengthPrefixed([][]byte{protoMsgs[0], {0x0a, 0xff, 0xff}, protoMsgs[2]})
	jsonMsgs := fileExporterMessages(t, "json")
	badJSON := append(append(append([]byte{}, jsonMsgs[0]...), "\n{\"resourceMetrics\": [}\n"...), jsonMsgs[2]...)
	bomb := bytes.Repeat([]byte{0x0a, 0}, 1<<20)
	cases := []struct {
		name, content, want string
	}{
		{"cut short", string(whole[:len(whole)-10]), "message 3 (offset"},
		{"trailing bytes", string(whole) + "\x00\x00", "2 bytes after the last length-prefixed message"},
		{"a bad message", string(badMiddle), "message 2 (offset"},
		{"a bad JSON document", string(badJSON), "document 2"},
		{"a zstd bomb in a message", string(lengthPrefixed(zstdEach(t, [][]byte{protoMsgs[0], bomb}))), "file too large"},
	}
	dir := t.TempDir()
	var files []string
	for i, c := range cases {
		p := filepath.Join(dir, "bad"+string(rune('0'+i)))
		if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	var sink countingSink
	res, err := Run(context.Background(), files, &sink, Options{MaxFileBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if sink.logs+sink.points+sink.spans != 0 {
		t.Errorf("damaged files gave %d logs, %d points, %d spans; want nothing", sink.logs, sink.points, sink.spans)
	}
	if len(res.Failed) != len(cases) {
		t.Fatalf("%d files failed, want %d: %v", len(res.Failed), len(cases), res.Failed)
	}
	for i, c := range cases {
		if got := res.Failed[i].Error(); !strings.Contains(got, c.want) {
			t.Errorf("%s: error %q, want it to contain %q", c.name, got, c.want)
		}
	}
}

// FuzzDecodeFile: no input makes decodeFile panic or read past its content,
// and what decodes as a length-prefixed file decodes alike message by message.
func FuzzDecodeFile(f *testing.F) {
	for _, format := range []string{"json", "proto"} {
		msgs := fileExporterMessages(f, format)
		f.Add(lengthPrefixed(msgs))
		f.Add(bytes.Join(msgs, []byte("\n")))
		f.Add(lengthPrefixed(zstdEach(f, msgs)))
	}
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 5, 0x0a, 0x03})
	f.Fuzz(func(t *testing.T, content []byte) {
		r := &fileReader{maxBytes: 1 << 20}
		defer r.close()
		var b batches
		held, err := r.decodeFile(content, &b)
		if err != nil {
			return
		}
		if !held.has(1) && b.logs.Len() != 0 {
			t.Fatalf("logs decoded but not reported")
		}
	})
}
