package s3store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrExists is returned by Commit when an object already exists under the
// key; it matches fs.ErrExist too.
var ErrExists = fmt.Errorf("s3store: object exists: %w", fs.ErrExist)

// ErrNotFound is returned by Open for a missing object; it matches
// fs.ErrNotExist too.
var ErrNotFound = fmt.Errorf("s3store: no such object: %w", fs.ErrNotExist)

// opError is a failed S3 call on one key.
type opError struct {
	op, key string
	err     error
}

func (e *opError) Error() string { return fmt.Sprintf("s3 %s %q: %v", e.op, e.key, e.err) }
func (e *opError) Unwrap() error { return e.err }

func wrap(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case isStatus(err, http.StatusPreconditionFailed) && (op == "put" || op == "complete upload"):
		err = fmt.Errorf("%w (%w)", ErrExists, err)
	case isNotFound(err):
		err = fmt.Errorf("%w (%w)", ErrNotFound, err)
	}
	return &opError{op: op, key: key, err: err}
}

// IsRetryable reports whether err, from this package, may succeed when the
// same call is made again later: throttling, server errors, timeouts and
// broken connections (after the SDK's own retries ran out). Missing
// objects, existing objects, denied access, bad requests and cancellation
// are permanent.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		code := re.HTTPStatusCode()
		return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
	}
	for _, r := range retry.DefaultRetryables {
		switch r.IsErrorRetryable(err) {
		case aws.TrueTernary:
			return true
		case aws.FalseTernary:
			return false
		}
	}
	return false
}

func isStatus(err error, code int) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == code
}

func isNotFound(err error) bool {
	if isStatus(err, http.StatusNotFound) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		}
	}
	return false
}

// notImplemented reports a server that refuses a request feature (here:
// conditional writes) rather than the request.
func notImplemented(err error) bool {
	if isStatus(err, http.StatusNotImplemented) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "NotImplemented"
}
