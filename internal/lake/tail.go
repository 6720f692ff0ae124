package lake

import (
	"context"
	"strings"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// TailSource serves rows that are acknowledged but not yet in a committed
// lake file (the unflushed tail of `sluice run`, docs/design/freshness.md)
// as in-memory lake files, so that queries see a record within about a
// second of its acknowledgement instead of at the next checkpoint.
//
// List answers what catalog.Catalog.List answers for f, plus tail files
// holding the rows that the listed catalog segments do not: no row is in
// both, and none acknowledged before the call is in neither. Tail files
// have paths under TailPrefix and are opened through the Store the query
// side was given (the tail wraps it). The caller calls release once it no
// longer opens the listed paths; until then they stay readable even after
// the rows reach the catalog.
//
// Implementations are safe for concurrent use.
type TailSource interface {
	List(ctx context.Context, f catalog.Filter) (segs []catalog.Segment, release func(), err error)
}

// TailPrefix starts the path of every tail file; no table is named so.
const TailPrefix = "_tail/"

// IsTailPath reports whether p names a tail file, which lives in memory
// only and never in the Store under that path.
func IsTailPath(p string) bool { return strings.HasPrefix(p, TailPrefix) }
