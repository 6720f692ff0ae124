package s3store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"testing"

	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func status(code int) error {
	return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("x")}
}

func TestIsRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{wrap("put", "k", status(503)), true},
		{wrap("put", "k", status(500)), true},
		{wrap("put", "k", status(429)), true},
		{wrap("put", "k", status(403)), false},
		{wrap("put", "k", status(400)), false},
		{wrap("put", "k", status(412)), false},
		{wrap("head", "k", status(404)), false},
		{wrap("get", "k", context.DeadlineExceeded), true},
		{wrap("get", "k", context.Canceled), false},
	} {
		if got := IsRetryable(c.err); got != c.want {
			t.Errorf("IsRetryable(%v) = %v", c.err, got)
		}
	}
	if err := wrap("put", "a/b", status(412)); !errors.Is(err, ErrExists) || !errors.Is(err, fs.ErrExist) {
		t.Errorf("412 on put: %v", err)
	}
	if err := wrap("get range 0+1", "a/b", status(412)); errors.Is(err, ErrExists) {
		t.Errorf("412 on a read is a changed object, not an existing one: %v", err)
	}
	if err := wrap("head", "a/b", status(404)); !errors.Is(err, ErrNotFound) || fmt.Sprint(err) == "" {
		t.Errorf("404: %v", err)
	}
}
