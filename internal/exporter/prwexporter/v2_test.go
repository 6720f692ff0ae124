package prwexporter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// refStore is a writeStorage for the reference handler: it decodes either
// protocol and keeps "labels @ts = value" lines.
type refStore struct {
	mu    sync.Mutex
	lines []string
	types []remoteapi.WriteMessageType
}

func (s *refStore) Store(r *http.Request, mt remoteapi.WriteMessageType) (*remoteapi.WriteResponse, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	resp := remoteapi.NewWriteResponse()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.types = append(s.types, mt)
	add := func(lbls []string, ts int64, v float64) {
		s.lines = append(s.lines, strings.Join(lbls, ",")+" @"+strconv.FormatInt(ts, 10)+" = "+strconv.FormatFloat(v, 'g', -1, 64))
	}
	switch mt {
	case remoteapi.WriteV2MessageType:
		var req writev2.Request
		if err := req.Unmarshal(b); err != nil {
			resp.SetStatusCode(400)
			return resp, err
		}
		for _, ts := range req.Timeseries {
			var l []string
			for i := 0; i+1 < len(ts.LabelsRefs); i += 2 {
				l = append(l, req.Symbols[ts.LabelsRefs[i]]+"="+req.Symbols[ts.LabelsRefs[i+1]])
			}
			for _, x := range ts.Samples {
				add(l, x.Timestamp, x.Value)
			}
			resp.Add(remoteapi.WriteResponseStats{Samples: len(ts.Samples)})
		}
	default:
		var req prompb.WriteRequest
		if err := req.Unmarshal(b); err != nil {
			resp.SetStatusCode(400)
			return resp, err
		}
		for _, ts := range req.Timeseries {
			var l []string
			for _, x := range ts.Labels {
				l = append(l, x.Name+"="+x.Value)
			}
			for _, x := range ts.Samples {
				add(l, x.Timestamp, x.Value)
			}
		}
	}
	return resp, nil
}

// Remote write 2.0 out, checked by the reference handler of
// client_golang/exp/api/remote (the protocol layer Prometheus uses): the
// same samples arrive as over 1.0. An endpoint that accepts 1.0 only
// answers 415 to 2.0; the exporter falls back to 1.0 for it and delivers.
func TestRemoteWrite2AndFallback(t *testing.T) {
	end := time.Unix(1_800_000_000, 0)
	body := testMetrics(t, end, 3)
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: body}}
	run := func(accept remoteapi.MessageTypes, protocol string) (*refStore, *Exporter) {
		st := &refStore{}
		srv := httptest.NewServer(remoteapi.NewWriteHandler(st, accept))
		t.Cleanup(srv.Close)
		exp, err := New(Config{Endpoints: []string{srv.URL}, Protocol: protocol})
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		sort.Strings(st.lines)
		return st, exp
	}
	both := remoteapi.MessageTypes{remoteapi.WriteV1MessageType, remoteapi.WriteV2MessageType}
	v1, _ := run(both, "1.0")
	v2, exp2 := run(both, "2.0")
	if len(v1.lines) == 0 || strings.Join(v1.lines, "\n") != strings.Join(v2.lines, "\n") {
		t.Fatalf("2.0 and 1.0 deliver different samples:\n1.0: %v\n2.0: %v", v1.lines, v2.lines)
	}
	if v2.types[0] != remoteapi.WriteV2MessageType || exp2.Fallbacks() != 0 {
		t.Fatalf("2.0 endpoint got %v (fallbacks %d)", v2.types, exp2.Fallbacks())
	}
	old, exp3 := run(remoteapi.MessageTypes{remoteapi.WriteV1MessageType}, "2.0")
	if strings.Join(old.lines, "\n") != strings.Join(v1.lines, "\n") || exp3.Fallbacks() != 1 {
		t.Fatalf("1.0-only endpoint: fallbacks %d, samples %v", exp3.Fallbacks(), old.lines)
	}
	t.Logf("%d samples identical over 1.0, 2.0 and 2.0->1.0 fallback", len(v1.lines))
}

// An endpoint that takes 1.0 only and does not check the Content-Type
// (Prometheus 2.x) reads a 2.0 request as an empty 1.0 one and answers
// 204 without the X-Prometheus-Remote-Write-*-Written headers. The
// exporter takes that answer as a 1.0 receiver's, falls back to 1.0 for
// the endpoint and delivers the samples over 1.0, then and afterwards.
func TestRemoteWrite2NoWrittenHeadersFallsBack(t *testing.T) {
	end := time.Unix(1_800_000_000, 0)
	body := testMetrics(t, end, 3)
	var mu sync.Mutex
	var types []string
	samples := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		raw, err := snappy.Decode(nil, b)
		var req prompb.WriteRequest // whatever was sent, as Prometheus 2.42 reads it
		if err == nil {
			err = req.Unmarshal(raw)
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		types = append(types, r.Header.Get("Content-Type"))
		for _, ts := range req.Timeseries {
			samples += len(ts.Samples)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	exp, err := New(Config{Endpoints: []string{srv.URL}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: body}}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if exp.Fallbacks() != 1 || len(types) != 3 || !strings.Contains(types[0], "v2") || types[1] != "application/x-protobuf" || types[2] != "application/x-protobuf" {
		t.Fatalf("fallbacks %d, requests %v: want one 2.0 request, then 1.0 (the same data again, and the next batch)", exp.Fallbacks(), types)
	}
	if samples == 0 || samples%2 != 0 {
		t.Fatalf("%d samples arrived over 1.0, want the batch's twice", samples)
	}
}
