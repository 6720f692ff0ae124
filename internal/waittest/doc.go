// Package waittest bounds the waits of tests that could otherwise last for
// ever: a call that retries until its context ends (an exporter's Send, a
// queue read), a goroutine's result, a WaitGroup. The bound, Limit, is
// generous for a loaded 2-core CI machine and far inside go test's
// -timeout, so a regression that makes a wait endless fails the test that
// waited, naming what it waited for, instead of hanging the whole package
// until the timeout's goroutine dump.
package waittest
