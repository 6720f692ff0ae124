package prom

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

func newTestLake(t testing.TB) *promtest.Lake { return promtest.NewLake(t) }

func adapterOf(t testing.TB, l *promtest.Lake) *Adapter {
	t.Helper()
	a, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var attr = promtest.Attr
