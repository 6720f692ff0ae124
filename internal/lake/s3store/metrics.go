package s3store

import (
	"context"
	"errors"
	"fmt"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts what the SDK's retryer does for each S3 operation: the
// retries it made (a slow or failing server shows here before anything
// fails) and the calls it gave up on after Config.MaxRetries attempts.
type metrics struct {
	retries   *prometheus.CounterVec
	exhausted *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_lake_s3_retries_total",
			Help: "S3 requests the lake's S3 client sent again after a retryable failure (500, 503, throttling, a broken connection), by operation."},
			[]string{"operation"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_lake_s3_retries_exhausted_total",
			Help: "S3 calls of the lake that failed after every attempt (lake.s3.max_retries), by operation."},
			[]string{"operation"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.retries, err = register(reg, m.retries); err != nil {
		return nil, err
	}
	if m.exhausted, err = register(reg, m.exhausted); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// its name (a second Store in one process shares the counters).
func register(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if ex, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return ex, nil
		}
	}
	return nil, fmt.Errorf("s3store: register metrics: %w", err)
}

// countRetries is an initialize-step middleware: it sees each call once,
// after the retry middleware (finalize step) has recorded every attempt.
func (m *metrics) countRetries(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("sluiceCountRetries",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			op := awsmiddleware.GetOperationName(ctx)
			if res, ok := retry.GetAttemptResults(md); ok && len(res.Results) > 1 {
				m.retries.WithLabelValues(op).Add(float64(len(res.Results) - 1))
			}
			var maxErr *retry.MaxAttemptsError
			if errors.As(err, &maxErr) {
				m.exhausted.WithLabelValues(op).Inc()
			}
			return out, md, err
		}), middleware.After)
}
