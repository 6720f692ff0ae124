package httpapi

import (
	"net/url"
	"testing"

	"github.com/sluice-dev/sluice/internal/query/prom"
)

// /api/v1/parse_query answers the syntax tree as Prometheus's (v0.316,
// web/api/v1, parseQuery) does, byte for byte: the answers below are
// Prometheus's own for these queries, one of each node type and of the
// fields that vary (grouping, matching cardinality and labels, bool,
// offsets, @ times, start() and end(), subquery steps, variadic calls,
// number forms). A query that does not parse gets Prometheus's 400: bad_data
// and its message. Over GET and POST alike.
func TestParseQueryAsPrometheus(t *testing.T) {
	base := server(t, prom.Limits{})
	for _, c := range []struct{ query, want string }{
		{`sum by (job) (rate(http_requests_total{job="api", code=~"5.."}[5m] offset 1h))`, `{"expr":{"args":[{"anchored":false,"matchers":[{"name":"job","type":"=","value":"api"},{"name":"code","type":"=~","value":"5.."},{"name":"__name__","type":"=","value":"http_requests_total"}],"name":"http_requests_total","offset":3600000,"offsetExpr":null,"range":300000,"rangeExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"matrixSelector"}],"func":{"argTypes":["matrix"],"name":"rate","returnType":"vector","variadic":0},"type":"call"},"grouping":["job"],"op":"sum","param":null,"type":"aggregation","without":false}`},
		{`a / ignoring(x) group_right(y) b`, `{"bool":false,"lhs":{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"a"}],"name":"a","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},"matching":{"card":"one-to-many","fillValues":{"lhs":null,"rhs":null},"include":["y"],"labels":["x"],"on":false},"op":"/","rhs":{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"b"}],"name":"b","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},"type":"binaryExpr"}`},
		{`a and on() b`, `{"bool":false,"lhs":{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"a"}],"name":"a","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},"matching":{"card":"many-to-many","fillValues":{"lhs":null,"rhs":null},"include":[],"labels":[],"on":true},"op":"and","rhs":{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"b"}],"name":"b","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},"type":"binaryExpr"}`},
		{`1 > bool 2`, `{"bool":true,"lhs":{"type":"numberLiteral","val":"1"},"matching":null,"op":"\u003e","rhs":{"type":"numberLiteral","val":"2"},"type":"binaryExpr"}`},
		{`-x`, `{"expr":{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"x"}],"name":"x","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},"op":"-","type":"unaryExpr"}`},
		{`x[1h:5m] offset 10m @ end()`, `{"expr":{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"x"}],"name":"x","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},"offset":600000,"offsetExpr":null,"range":3600000,"rangeExpr":null,"startOrEnd":"end","step":300000,"stepExpr":null,"timestamp":null,"type":"subquery"}`},
		{`y{a!="b",c!~"d"}[30s] @ start()`, `{"anchored":false,"matchers":[{"name":"a","type":"!=","value":"b"},{"name":"c","type":"!~","value":"d"},{"name":"__name__","type":"=","value":"y"}],"name":"y","offset":0,"offsetExpr":null,"range":30000,"rangeExpr":null,"smoothed":false,"startOrEnd":"start","timestamp":null,"type":"matrixSelector"}`},
		{`x @ 100.5`, `{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"x"}],"name":"x","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":100500,"type":"vectorSelector"}`},
		{`topk(3, x)`, `{"expr":{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"x"}],"name":"x","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},"grouping":[],"op":"topk","param":{"type":"numberLiteral","val":"3"},"type":"aggregation","without":false}`},
		{`count_values("v", x) without (a)`, `{"expr":{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"x"}],"name":"x","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},"grouping":["a"],"op":"count_values","param":{"type":"stringLiteral","val":"v"},"type":"aggregation","without":true}`},
		{`round(x, 0.5)`, `{"args":[{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"x"}],"name":"x","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},{"type":"numberLiteral","val":"0.5"}],"func":{"argTypes":["vector","scalar"],"name":"round","returnType":"vector","variadic":1},"type":"call"}`},
		{`label_join(x, "d", ",", "a", "b")`, `{"args":[{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"x"}],"name":"x","offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"},{"type":"stringLiteral","val":"d"},{"type":"stringLiteral","val":","},{"type":"stringLiteral","val":"a"},{"type":"stringLiteral","val":"b"}],"func":{"argTypes":["vector","string","string","string"],"name":"label_join","returnType":"vector","variadic":-1},"type":"call"}`},
		{`time()`, `{"args":[],"func":{"argTypes":[],"name":"time","returnType":"scalar","variadic":0},"type":"call"}`},
		{`(1e3)`, `{"expr":{"type":"numberLiteral","val":"1000"},"type":"parenExpr"}`},
		{`+Inf`, `{"type":"numberLiteral","val":"+Inf"}`},
		{`"s"`, `{"type":"stringLiteral","val":"s"}`},
	} {
		for _, send := range []func(*testing.T, string, string, string, url.Values) (int, apiResp){get, post} {
			code, r := send(t, base, "acme", "/api/v1/parse_query", vals("query", c.query))
			if code != 200 || r.Status != "success" || string(r.Data) != c.want {
				t.Errorf("%s: %d %s %s\n got  %s\n want %s", c.query, code, r.Status, r.Error, r.Data, c.want)
			}
		}
	}
	for _, c := range []struct{ query, want string }{
		{`foo{`, `invalid parameter "query": 1:5: parse error: unexpected end of input inside braces`},
		{`sum(`, `invalid parameter "query": 1:5: parse error: unclosed left parenthesis`},
		{`rate(x)`, `invalid parameter "query": 1:6: parse error: expected type range vector in call to function "rate", got instant vector`},
		{``, `invalid parameter "query": unknown position: parse error: no expression found in input`},
	} {
		for _, send := range []func(*testing.T, string, string, string, url.Values) (int, apiResp){get, post} {
			code, r := send(t, base, "acme", "/api/v1/parse_query", vals("query", c.query))
			if code != 400 || r.Status != "error" || r.ErrorType != "bad_data" || r.Error != c.want {
				t.Errorf("%q: %d %s %s %q, want 400 bad_data %q", c.query, code, r.Status, r.ErrorType, r.Error, c.want)
			}
		}
	}
}
