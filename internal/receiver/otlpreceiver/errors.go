package otlpreceiver

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrInvalid marks a permanent rejection: the request can never succeed, so
// the client is told not to retry (HTTP 400, gRPC InvalidArgument). A
// consumer wraps it: fmt.Errorf("decode logs: %w: %v", ErrInvalid, err).
var ErrInvalid = errors.New("invalid request")

// ErrBackpressure marks a temporary refusal because downstream is full
// (HTTP 429, gRPC RESOURCE_EXHAUSTED). Return a *BackpressureError to also
// pass a retry hint; a bare ErrBackpressure uses DefaultRetryAfter.
var ErrBackpressure = errors.New("backpressure")

// DefaultRetryAfter is the retry hint sent when none is known.
const DefaultRetryAfter = time.Second

// BackpressureError is ErrBackpressure with a hint of when to retry.
type BackpressureError struct {
	RetryAfter time.Duration // <= 0 means DefaultRetryAfter
	Err        error         // optional cause
}

// Backpressure returns a *BackpressureError asking the client to retry after d.
func Backpressure(d time.Duration, cause error) error {
	return &BackpressureError{RetryAfter: d, Err: cause}
}

func (e *BackpressureError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("backpressure (retry after %s): %v", e.RetryAfter, e.Err)
	}
	return fmt.Sprintf("backpressure (retry after %s)", e.RetryAfter)
}

// Is makes errors.Is(err, ErrBackpressure) true for every *BackpressureError.
func (e *BackpressureError) Is(target error) bool { return target == ErrBackpressure }

func (e *BackpressureError) Unwrap() error { return e.Err }

// errorClass is how a consumer error is answered.
type errorClass uint8

const (
	classRetryable    errorClass = iota // 503 / Unavailable
	classInvalid                        // 400 / InvalidArgument
	classBackpressure                   // 429 / RESOURCE_EXHAUSTED
)

// classify maps a consumer error to its answer and, for backpressure, the
// retry hint. Backpressure wins over ErrInvalid when both are wrapped,
// since retrying later is the safer reading.
func classify(err error) (errorClass, time.Duration) {
	var bp *BackpressureError
	if errors.As(err, &bp) {
		if bp.RetryAfter > 0 {
			return classBackpressure, bp.RetryAfter
		}
		return classBackpressure, DefaultRetryAfter
	}
	if errors.Is(err, ErrBackpressure) {
		return classBackpressure, DefaultRetryAfter
	}
	if errors.Is(err, ErrInvalid) {
		return classInvalid, 0
	}
	return classRetryable, DefaultRetryAfter
}

// HTTPStatus is the HTTP answer to a consumer error, as this receiver
// gives it: 429 with the retry hint for backpressure, 400 for ErrInvalid,
// 503 with DefaultRetryAfter for anything else. Other receivers (remote
// write) answer with it so that every edge classifies errors alike; remote
// write turns the 429 into a 503, which Prometheus's sender retries.
func HTTPStatus(err error) (status int, retryAfter time.Duration) {
	class, retry := classify(err)
	switch class {
	case classInvalid:
		return http.StatusBadRequest, 0
	case classBackpressure:
		return http.StatusTooManyRequests, retry
	}
	return http.StatusServiceUnavailable, retry
}
