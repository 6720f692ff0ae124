package catalog

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/waittest"
)

func TestFamilyMetadata(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		t0 := time.Unix(1700000000, 0)
		put := func(tenant string, max int, ms ...FamilyMetadata) int {
			t.Helper()
			refused, err := c.PutFamilyMetadata(ctx, tenant, ms, max)
			if err != nil {
				t.Fatal(err)
			}
			return refused
		}
		list := func(tenant, name string) []FamilyMetadata {
			t.Helper()
			ms, err := c.ListFamilyMetadata(ctx, tenant, name)
			if err != nil {
				t.Fatal(err)
			}
			return ms
		}
		put("a", 0,
			FamilyMetadata{Name: "jobs", Type: "counter", Help: "Jobs run.", Unit: "", Updated: t0},
			FamilyMetadata{Name: "heap", Type: "gauge", Help: "Heap.", Unit: "bytes", Updated: t0})
		put("b", 0, FamilyMetadata{Name: "jobs", Type: "gauge", Updated: t0})
		// The latest entry of a family replaces the one before.
		put("a", 0, FamilyMetadata{Name: "jobs", Type: "counter", Help: "Jobs run, all kinds.", Updated: t0.Add(time.Minute)})
		got := list("a", "")
		want := []FamilyMetadata{
			{Name: "heap", Type: "gauge", Help: "Heap.", Unit: "bytes", Updated: t0},
			{Name: "jobs", Type: "counter", Help: "Jobs run, all kinds.", Updated: t0.Add(time.Minute)},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("tenant a:\n got %v\nwant %v", got, want)
		}
		if got := list("b", "jobs"); len(got) != 1 || got[0].Type != "gauge" {
			t.Fatalf("tenant b jobs: %v", got)
		}
		if got := list("a", "nope"); len(got) != 0 {
			t.Fatalf("unknown family: %v", got)
		}
		// The cap refuses new families, never updates of known ones.
		if r := put("a", 2, FamilyMetadata{Name: "new", Type: "gauge", Updated: t0},
			FamilyMetadata{Name: "heap", Type: "gauge", Help: "Heap in use.", Unit: "bytes", Updated: t0}); r != 1 {
			t.Fatalf("refused %d, want 1", r)
		}
		if got := list("a", ""); len(got) != 2 || got[0].Help != "Heap in use." {
			t.Fatalf("after cap: %v", got)
		}
		// Concurrent writers of the same new families both succeed.
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.PutFamilyMetadata(ctx, "c", []FamilyMetadata{{Name: "x", Type: "gauge", Help: fmt.Sprint(i), Updated: t0}}, 10)
				errs <- err
			}()
		}
		waittest.Wait(t, &wg, "the concurrent metadata writers")
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := list("c", ""); len(got) != 1 {
			t.Fatalf("concurrent: %v", got)
		}
	})
}
