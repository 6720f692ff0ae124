package httpapi

import (
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// FuzzQueryDepth: queryDepth never panics, and for every expression the
// parser accepts it is at least the depth of the parsed tree minus its
// leaves' wrappers, so the check before parsing never lets a deeper tree
// through than it reports.
func FuzzQueryDepth(f *testing.F) {
	for _, s := range []string{`up`, `sum(rate(x{a="(("}[5m]))`, `a + b * c`, `-(-(-1))`, `x and y or z unless w`,
		`histogram_quantile(0.9, sum by (le) (rate(b[5m])))`, "`(`", `a{b=~"[["} offset -5m`, `1 > bool 2`, `((1))+(((2)))`} {
		f.Add(s)
	}
	p := parser.NewParser(parser.Options{})
	f.Fuzz(func(t *testing.T, q string) {
		d := queryDepth(q)
		if len(q) > 512 {
			return
		}
		expr, err := p.ParseExpr(q)
		if err != nil {
			return
		}
		deepest := 0
		parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
			// Leaves (selectors, literals) add nothing the text nests.
			if len(path) > deepest {
				deepest = len(path)
			}
			return nil
		})
		if deepest > d+1 {
			t.Fatalf("queryDepth(%q) = %d, but the parsed tree is %d deep", q, d, deepest)
		}
	})
}
