package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/prometheus/promql/parser"
)

// exemplarJSON and exemplarSeries are Prometheus's query_exemplars answer:
// values as strings, timestamps in seconds, both written as Prometheus
// writes them (appendValue, appendTimestamp).
type exemplarJSON struct {
	Labels    map[string]string `json:"labels"`
	Value     string            `json:"value"`
	Timestamp json.RawMessage   `json:"timestamp"`
}

type exemplarSeries struct {
	SeriesLabels map[string]string `json:"seriesLabels"`
	Exemplars    []exemplarJSON    `json:"exemplars"`
}

// queryExemplars serves GET/POST /api/v1/query_exemplars: the exemplars of
// the series every selector of the query expression matches, in [start,
// end] (default: everything), from the lake's exemplars column
// (prom.Adapter.Exemplars).
func (h *Handler) queryExemplars(r *http.Request, t string) (any, error) {
	qs := r.Form.Get("query")
	if qs == "" {
		return nil, badData("invalid parameter \"query\": empty query")
	}
	if err := h.checkExpr("query", qs); err != nil {
		return nil, err
	}
	expr, err := h.parser.ParseExpr(qs)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	mint, maxt, err := timeRange(r)
	if err != nil {
		return nil, err
	}
	if maxt < mint {
		// Prometheus's text; its series and label endpoints answer an
		// empty list instead (timeRange).
		return nil, badData("end timestamp must not be before start timestamp")
	}
	sets := parser.ExtractSelectors(expr)
	out := []exemplarSeries{}
	if len(sets) == 0 {
		return out, nil
	}
	ctx, cancel, err := h.queryContext(r)
	if err != nil {
		return nil, err
	}
	defer cancel()
	lim := h.cfg.Limits
	if b := budgetOf(ctx); b != nil {
		lim.Charge = b.charge
	}
	res, err := h.cfg.Adapter.Exemplars(ctx, t, lim, mint, maxt, sets)
	if err != nil {
		return nil, err
	}
	for _, s := range res {
		es := exemplarSeries{SeriesLabels: s.SeriesLabels.Map(), Exemplars: make([]exemplarJSON, 0, len(s.Exemplars))}
		for _, e := range s.Exemplars {
			es.Exemplars = append(es.Exemplars, exemplarJSON{Labels: e.Labels.Map(),
				Value: string(appendValue(nil, e.Value)), Timestamp: appendTimestamp(nil, e.Ts)})
		}
		out = append(out, es)
	}
	return out, nil
}
