package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/bloom"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// The cached bloom filters never rule out an id a row group holds, and
// rule out almost every id it does not.
func TestTraceIndexBloom(t *testing.T) {
	tl := buildLake(t, 100, []copySpec{{"default", 0}}, nil)
	h := NewHandler(tl.cat, tl.store, Options{}).(*Handler)
	segs, err := tl.cat.List(context.Background(), catalog.Filter{Table: "traces", Tenant: "default"})
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	groups, present, absent, ruledOut := 0, 0, 0, 0
	for _, seg := range segs {
		ix, err := h.traceIndexOf(seg.Path, "default")
		if err != nil {
			t.Fatal(err)
		}
		lf, err := h.files.acquire(seg.Path, "traces", "default")
		if err != nil {
			t.Fatal(err)
		}
		tc := lf.col("trace_id")
		for g, rg := range lf.pf.RowGroups() {
			groups++
			if ix.groups[g].bloom == nil {
				t.Fatalf("%s row group %d: no bloom filter", seg.Path, g)
			}
			err := eachValue(rg.ColumnChunks()[tc], make([]parquet.Value, 64), func(_ int, vals []parquet.Value) error {
				for _, v := range vals {
					if v.IsNull() {
						continue
					}
					id := string(v.ByteArray())
					present++
					if !ix.mayHold(g, id, bloom.XXH64{}.Sum64([]byte(id))) {
						return fmt.Errorf("row group %d holds %s but the index rules it out", g, id)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 200; i++ {
				id := fmt.Sprintf("%016x%016x", rnd.Uint64(), rnd.Uint64())
				absent++
				if !ix.groups[g].bloom.Check(bloom.XXH64{}.Sum64([]byte(id))) {
					ruledOut++
				}
			}
		}
		h.files.release(lf)
	}
	if groups < 10 || present == 0 {
		t.Fatalf("only %d row groups, %d ids", groups, present)
	}
	if ruledOut < absent*9/10 {
		t.Fatalf("bloom filters ruled out %d of %d absent ids", ruledOut, absent)
	}
}
