package otlpreceiver

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Protobuf wire types used below.
const (
	wireVarint = 0
	wireBytes  = 2
)

// appendExportResponse appends an Export{Logs,Metrics,Trace}ServiceResponse.
// The three share one layout: partial_success = 1 holding
// rejected_{log_records,data_points,spans} = 1 (int64) and
// error_message = 2, so one encoder serves every signal. Full success is
// the empty message.
func appendExportResponse(dst []byte, res Result) []byte {
	if res.RejectedRecords == 0 && res.Message == "" {
		return dst
	}
	n := 0
	if res.RejectedRecords != 0 {
		n += 1 + varintLen(uint64(res.RejectedRecords))
	}
	if res.Message != "" {
		n += 1 + varintLen(uint64(len(res.Message))) + len(res.Message)
	}
	dst = append(dst, 1<<3|wireBytes)
	dst = binary.AppendUvarint(dst, uint64(n))
	if res.RejectedRecords != 0 {
		dst = append(dst, 1<<3|wireVarint)
		dst = binary.AppendUvarint(dst, uint64(res.RejectedRecords))
	}
	if res.Message != "" {
		dst = append(dst, 2<<3|wireBytes)
		dst = binary.AppendUvarint(dst, uint64(len(res.Message)))
		dst = append(dst, res.Message...)
	}
	return dst
}

// appendStatus appends a google.rpc.Status{code = 1, message = 2}, the body
// of OTLP/HTTP error responses.
func appendStatus(dst []byte, code codes.Code, msg string) []byte {
	if code != 0 {
		dst = append(dst, 1<<3|wireVarint)
		dst = binary.AppendUvarint(dst, uint64(code))
	}
	if msg != "" {
		dst = append(dst, 2<<3|wireBytes)
		dst = binary.AppendUvarint(dst, uint64(len(msg)))
		dst = append(dst, msg...)
	}
	return dst
}

// statusJSON is google.rpc.Status in proto3 JSON form.
func statusJSON(code codes.Code, msg string) []byte {
	b, err := json.Marshal(struct {
		Code    int32  `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	}{int32(code), msg})
	if err != nil {
		// Only unsupported types fail; these are a string and an int.
		panic(fmt.Sprintf("marshal status: %v", err))
	}
	return b
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// exportResponseJSON renders the response in OTLP/JSON. JSON is the slow
// path, so pdata's encoder is worth its allocations for exact field names.
func exportResponseJSON(kind signal.Kind, res Result) ([]byte, error) {
	if res.RejectedRecords == 0 && res.Message == "" {
		return []byte("{}"), nil
	}
	switch kind {
	case signal.KindLogs:
		r := plogotlp.NewExportResponse()
		r.PartialSuccess().SetRejectedLogRecords(res.RejectedRecords)
		r.PartialSuccess().SetErrorMessage(res.Message)
		return r.MarshalJSON()
	case signal.KindMetrics:
		r := pmetricotlp.NewExportResponse()
		r.PartialSuccess().SetRejectedDataPoints(res.RejectedRecords)
		r.PartialSuccess().SetErrorMessage(res.Message)
		return r.MarshalJSON()
	case signal.KindTraces:
		r := ptraceotlp.NewExportResponse()
		r.PartialSuccess().SetRejectedSpans(res.RejectedRecords)
		r.PartialSuccess().SetErrorMessage(res.Message)
		return r.MarshalJSON()
	}
	return nil, fmt.Errorf("export response for signal %v", kind)
}

// jsonToProto converts an OTLP/JSON export request to protobuf. The body
// is checked first (otlp.PrepareJSONRequest): one object, bounded nesting,
// null members read as defaults, and its records counted, so that tooMany
// (the refusal of that many, "" when fine) stops it before pdata builds an
// object for each.
func jsonToProto(kind signal.Kind, body []byte, tooMany func(records, holders int) string) ([]byte, error) {
	body, n, err := otlp.PrepareJSONRequest(body)
	if err != nil {
		return nil, fmt.Errorf("decode otlp/json %s: %w", kind, err)
	}
	if other := n.Kinds &^ (1 << kind); other != 0 {
		// pdata would skip another signal's list as an unknown field:
		// acknowledged, and lost.
		k := signal.KindLogs
		for other&(1<<k) == 0 {
			k++
		}
		return nil, fmt.Errorf("decode otlp/json %s: the body holds %s (its resource list), not %s: post it to /v1/%[2]s", kind, k, kind)
	}
	if msg := tooMany(n.Records, n.Holders); msg != "" {
		return nil, errors.New(msg)
	}
	switch kind {
	case signal.KindLogs:
		r := plogotlp.NewExportRequest()
		if err := r.UnmarshalJSON(body); err != nil {
			return nil, fmt.Errorf("decode otlp/json logs: %w", err)
		}
		return r.MarshalProto()
	case signal.KindMetrics:
		r := pmetricotlp.NewExportRequest()
		if err := r.UnmarshalJSON(body); err != nil {
			return nil, fmt.Errorf("decode otlp/json metrics: %w", err)
		}
		return r.MarshalProto()
	case signal.KindTraces:
		r := ptraceotlp.NewExportRequest()
		if err := r.UnmarshalJSON(body); err != nil {
			return nil, fmt.Errorf("decode otlp/json traces: %w", err)
		}
		return r.MarshalProto()
	}
	return nil, fmt.Errorf("otlp/json for signal %v", kind)
}
