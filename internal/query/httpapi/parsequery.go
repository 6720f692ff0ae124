package httpapi

import (
	"net/http"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// parseQuery answers the expression's syntax tree, as Prometheus's
// experimental /api/v1/parse_query does for its UI's tree view: one JSON
// object per node, its "type" naming the node (aggregation, binaryExpr,
// call, matrixSelector, subquery, durationExpr, numberLiteral, parenExpr,
// stringLiteral, unaryExpr, vectorSelector) and its other fields those of
// Prometheus's answer, durations in milliseconds. A query that does not
// parse gets Prometheus's answer, 400 bad_data naming the parse error, as
// format_query does. It parses but reads nothing, so it takes no query
// slot; the query's length and depth are bounded as for any query, which
// also bounds the tree's recursion here.
func (h *Handler) parseQuery(r *http.Request, _ string) (any, error) {
	qs := r.Form.Get("query")
	if err := h.checkExpr("query", qs); err != nil {
		return nil, err
	}
	expr, err := h.parser.ParseExpr(qs)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	return astNode(expr), nil
}

// node is one node of the answer; encoding/json writes its keys sorted,
// as Prometheus's encoder writes its maps.
type node = map[string]any

// astNode is the answer's form of e (nil: JSON null).
func astNode(e parser.Expr) any {
	switch n := e.(type) {
	case nil:
		return nil
	case *parser.AggregateExpr:
		return node{"type": "aggregation", "op": n.Op.String(), "expr": astNode(n.Expr), "param": astNode(n.Param),
			"grouping": orEmpty(n.Grouping), "without": n.Without}
	case *parser.BinaryExpr:
		var matching any // null without vector matching (scalar operands)
		if m := n.VectorMatching; m != nil {
			matching = node{"card": m.Card.String(), "labels": orEmpty(m.MatchingLabels), "on": m.On, "include": orEmpty(m.Include),
				"fillValues": map[string]*float64{"lhs": m.FillValues.LHS, "rhs": m.FillValues.RHS}}
		}
		return node{"type": "binaryExpr", "op": n.Op.String(), "lhs": astNode(n.LHS), "rhs": astNode(n.RHS),
			"matching": matching, "bool": n.ReturnBool}
	case *parser.Call:
		args := make([]any, 0, len(n.Args))
		for _, a := range n.Args {
			args = append(args, astNode(a))
		}
		return node{"type": "call", "args": args, "func": node{"name": n.Func.Name, "argTypes": n.Func.ArgTypes,
			"variadic": n.Func.Variadic, "returnType": n.Func.ReturnType}}
	case *parser.MatrixSelector:
		vs := n.VectorSelector.(*parser.VectorSelector)
		sel := selectorNode("matrixSelector", vs)
		sel["range"], sel["rangeExpr"] = n.Range.Milliseconds(), durationNode(n.RangeExpr)
		return sel
	case *parser.SubqueryExpr:
		return node{"type": "subquery", "expr": astNode(n.Expr),
			"range": n.Range.Milliseconds(), "rangeExpr": durationNode(n.RangeExpr),
			"offset": n.OriginalOffset.Milliseconds(), "offsetExpr": durationNode(n.OriginalOffsetExpr),
			"step": n.Step.Milliseconds(), "stepExpr": durationNode(n.StepExpr),
			"timestamp": n.Timestamp, "startOrEnd": startOrEnd(n.StartOrEnd)}
	case *parser.DurationExpr:
		return durationNode(n)
	case *parser.NumberLiteral:
		return node{"type": "numberLiteral", "val": formatNumber(n.Val)}
	case *parser.ParenExpr:
		return node{"type": "parenExpr", "expr": astNode(n.Expr)}
	case *parser.StringLiteral:
		return node{"type": "stringLiteral", "val": n.Val}
	case *parser.UnaryExpr:
		return node{"type": "unaryExpr", "op": n.Op.String(), "expr": astNode(n.Expr)}
	case *parser.VectorSelector:
		return selectorNode("vectorSelector", n)
	}
	// The parser makes no other node; a new one in a later version of
	// the library must be added here, not answered wrong.
	return node{"type": "unknown"}
}

// selectorNode is the fields a vector and a matrix selector share.
func selectorNode(typ string, vs *parser.VectorSelector) node {
	matchers := make([]node, 0, len(vs.LabelMatchers))
	for _, m := range vs.LabelMatchers {
		matchers = append(matchers, matcherNode(m))
	}
	return node{"type": typ, "name": vs.Name, "matchers": matchers,
		"offset": vs.OriginalOffset.Milliseconds(), "offsetExpr": durationNode(vs.OriginalOffsetExpr),
		"timestamp": vs.Timestamp, "startOrEnd": startOrEnd(vs.StartOrEnd),
		"anchored": vs.Anchored, "smoothed": vs.Smoothed}
}

func matcherNode(m *labels.Matcher) node {
	return node{"name": m.Name, "value": m.Value, "type": m.Type.String()}
}

// durationNode is a duration expression (offset 1h+5m, [5m*2]): an
// arithmetic node, or a number literal that says whether it was written
// as a duration; nil when there is none.
func durationNode(e parser.Expr) any {
	switch n := e.(type) {
	case nil:
		return nil
	case *parser.DurationExpr:
		if n == nil {
			return nil
		}
		return node{"type": "durationExpr", "op": n.Op.String(), "lhs": durationNode(n.LHS), "rhs": durationNode(n.RHS), "wrapped": n.Wrapped}
	case *parser.NumberLiteral:
		if n == nil {
			return nil
		}
		return node{"type": "numberLiteral", "val": formatNumber(n.Val), "duration": n.Duration}
	}
	return astNode(e)
}

// formatNumber writes a number literal's value as Prometheus's answer
// does: shortest decimal, no exponent ("NaN", "+Inf" as Go spells them).
func formatNumber(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// startOrEnd is the @ modifier's start() or end(), else null.
func startOrEnd(t parser.ItemType) any {
	if t == 0 {
		return nil
	}
	return t.String()
}

// orEmpty writes a missing label list as [], not null.
func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
