package waittest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Limit is how long any one bounded wait may take.
const Limit = time.Minute

// Context is the context for one call of t that may wait: it ends after
// Limit, or when t ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Limit)
	t.Cleanup(cancel)
	return ctx
}

// Recv receives from ch, failing t when nothing comes within Limit; what
// names the wait. Call it from t's goroutine.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(Limit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing after %v", what, Limit)
	}
	var zero T
	return zero
}

// Wait waits for wg, failing t when it has not finished within Limit; what
// names the goroutines waited for. Call it from t's goroutine.
func Wait(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	Recv(t, done, what)
}
