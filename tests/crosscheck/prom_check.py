#!/usr/bin/env python3
"""Independent PromQL answers computed from the raw Parquet of a sluice lake.

DuckDB reads the metrics rows; this script applies, by itself, the
OTLP -> Prometheus mapping of docs/query.md (names, labels, classic
histogram buckets) and Prometheus 3's evaluation rules for the few query
shapes the end-to-end test uses: left-open windows (t - range, t], the 5m
lookback of instant selectors, rate/increase with Prometheus's
extrapolation (extrapolatedRate in promql/functions.go, reimplemented here,
start timestamps unused as in the default engine), avg_over_time, sum by,
and histogram_quantile's linear interpolation (bucketQuantile). Nothing
here shares code with sluice.

usage: prom_check.py --lake DIR [--tenant T] --cases JSON
JSON is a list of {"name", "time"} (instant) or {"name", "start", "end",
"step"} (range), times in seconds. Prints {name: [{"metric": {...},
"values": [[seconds, value], ...]}]}.
"""
import argparse
import collections
import json
import math
import re
import sys
import urllib.parse

import duckdb

LOOKBACK_MS = 300_000

# The queries the test runs, each as (OTLP metric name, how it is evaluated).
# The Prometheus names are spelled out here, not derived by sluice's code.
CASES = {
    "selector_corpus": ("system.cpu.time", "system_cpu_time_seconds_total"),
    "sum_by_corpus": ("flamethrower.gauge.0", "flamethrower_gauge_0"),
    "sum_rate": ("test.requests", "test_requests_total"),
    "increase": ("test.requests", "test_requests_total"),
    "avg_over_time": ("test.queue.depth", "test_queue_depth"),
    "histogram_quantile": ("test.latency", "test_latency_seconds"),
}


def label_name(key):
    """The OpenTelemetry spec's attribute key -> label name sanitisation."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", key)
    name = re.sub(r"__+", "_", name)
    if name and name[0].isdigit():
        name = "key_" + name
    if name.strip("_") == "":
        return None
    if name in ("job", "instance", "service_name", "le", "quantile") or name.startswith("__"):
        name = "exported_" + name
    return name


def fmt_float(v):
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if float(v).is_integer():
        return str(int(v))
    return repr(float(v))


def row_labels(row, cols):
    labels = {}
    svc = row.get("service_name")
    if svc:
        labels["service_name"] = svc
        ns = row.get("resource.service.namespace")
        labels["job"] = f"{ns}/{svc}" if ns else svc
    inst = row.get("resource.service.instance.id")
    if inst:
        labels["instance"] = inst
    by_label = collections.defaultdict(list)
    for c in cols:
        if not c.startswith("attr.") or row.get(c) is None:
            continue
        rest = c[len("attr."):]
        typ = ""
        if "#" in rest:
            rest, typ = rest.rsplit("#", 1)
        key = urllib.parse.unquote(rest)  # only %23 and %25 are ever escaped
        v = row[c]
        if typ == "":
            val = v
        elif typ == "int":
            val = str(int(v))
        elif typ == "bool":
            val = "true" if v else "false"
        elif typ == "double":
            val = repr(float(v))
        else:
            continue
        name = label_name(key)
        if name:
            by_label[name].append((key, val))
    for name, kvs in by_label.items():
        labels[name] = ";".join(v for _, v in sorted(kvs))
    return labels


def load(lake, tenant, metric):
    """Rows of one OTLP metric as dicts, with t in ms."""
    glob = f"{lake}/metrics/tenant={tenant}/**/*.parquet"
    con = duckdb.connect()
    rel = con.execute(
        f"SELECT * EXCLUDE (timestamp, start_timestamp), epoch_ns(timestamp) // 1000000 AS t_ms FROM read_parquet(?, union_by_name = true) "
        f"WHERE metric_name = ? AND timestamp IS NOT NULL",
        [glob, metric],
    )
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r)) for r in rel.fetchall()], cols


def series_of(rows, cols, prom_name, kind):
    """Prometheus series: frozenset(labels) -> sorted [(t_ms, value)]."""
    out = collections.defaultdict(dict)
    for r in rows:
        base = row_labels(r, cols)
        t = r["t_ms"]
        if kind == "value":
            if r["value"] is None:
                continue
            out[frozenset({**base, "__name__": prom_name}.items())][t] = float(r["value"])
        elif kind == "bucket":
            bounds, counts = r["explicit_bounds"], r["bucket_counts"]
            if len(counts) != len(bounds) + 1:
                continue
            cum = 0
            for i, c in enumerate(counts):
                cum += c
                le = fmt_float(bounds[i]) if i < len(bounds) else "+Inf"
                out[frozenset({**base, "__name__": prom_name + "_bucket", "le": le}.items())][t] = float(cum)
    return {k: sorted(v.items()) for k, v in out.items()}


def window(samples, t, rng):
    return [(ts, v) for ts, v in samples if t - rng < ts <= t]


def extrapolated_rate(samples, t, rng, is_rate):
    """Prometheus's extrapolatedRate for float counters; None if < 2 samples."""
    s = window(samples, t, rng)
    if len(s) < 2:
        return None
    result = s[-1][1] - s[0][1]
    for (_, prev), (_, cur) in zip(s, s[1:]):
        if cur < prev:
            result += prev
    range_start, range_end = t - rng, t
    first_t, last_t = s[0][0], s[-1][0]
    to_start = (first_t - range_start) / 1000
    to_end = (range_end - last_t) / 1000
    sampled = (last_t - first_t) / 1000
    avg = sampled / (len(s) - 1)
    threshold = avg * 1.1
    if to_start >= threshold:
        to_start = avg / 2
    to_zero = to_start
    if result > 0 and s[0][1] >= 0:
        to_zero = sampled * (s[0][1] / result)
    if to_zero < to_start:
        to_start = to_zero
    if to_end >= threshold:
        to_end = avg / 2
    factor = (sampled + to_start + to_end) / sampled
    if is_rate:
        factor /= rng / 1000
    return result * factor


def bucket_quantile(q, buckets):
    """histogram_quantile over [(le, count)] (monotonic input assumed)."""
    buckets = sorted(buckets)
    if not buckets or not math.isinf(buckets[-1][0]):
        return math.nan
    obs = buckets[-1][1]
    if len(buckets) < 2 or obs == 0:
        return math.nan
    rank = q * obs
    b = len(buckets) - 1  # sort.Search over all but the +Inf bucket
    for i in range(len(buckets) - 1):
        if buckets[i][1] >= rank:
            b = i
            break
    if b == len(buckets) - 1:
        return buckets[-2][0]
    if b == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    start, end, count = 0.0, buckets[b][0], buckets[b][1]
    if b > 0:
        start = buckets[b - 1][0]
        count -= buckets[b - 1][1]
        rank -= buckets[b - 1][1]
    return start + (end - start) * (rank / count)


def drop(labels, names):
    return frozenset((k, v) for k, v in labels if k not in names)


def keep(labels, names):
    return frozenset((k, v) for k, v in labels if k in names)


def evaluate(name, series, t):
    """One step of case name at t (ms): {frozenset(labels): value}."""
    out = {}
    if name == "selector_corpus":
        for k, s in series.items():
            w = window(s, t, LOOKBACK_MS)
            if w:
                out[k] = w[-1][1]
    elif name == "sum_by_corpus":
        for k, s in series.items():
            w = window(s, t, LOOKBACK_MS)
            if w:
                g = keep(k, {"service_name"})
                out[g] = out.get(g, 0.0) + w[-1][1]
    elif name == "sum_rate":
        for k, s in series.items():
            r = extrapolated_rate(s, t, 300_000, True)
            if r is not None:
                g = keep(k, {"service_name"})
                out[g] = out.get(g, 0.0) + r
    elif name == "increase":
        for k, s in series.items():
            r = extrapolated_rate(s, t, 3_600_000, False)
            if r is not None:
                out[drop(k, {"__name__"})] = r
    elif name == "avg_over_time":
        for k, s in series.items():
            w = window(s, t, 600_000)
            if w:
                out[drop(k, {"__name__"})] = sum(v for _, v in w) / len(w)
    elif name == "histogram_quantile":
        by_le = {}
        for k, s in series.items():
            r = extrapolated_rate(s, t, 300_000, True)
            if r is not None:
                le = dict(k)["le"]
                by_le[le] = by_le.get(le, 0.0) + r
        if by_le:
            out[frozenset()] = bucket_quantile(0.9, [(float(le), c) for le, c in by_le.items()])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", required=True)
    ap.add_argument("--tenant", default="default")
    ap.add_argument("--cases", required=True)
    args = ap.parse_args()
    results = {}
    for case in json.loads(args.cases):
        name = case["name"]
        metric, prom_name = CASES[name]
        rows, cols = load(args.lake, args.tenant, metric)
        if not rows:
            sys.exit(f"prom_check: no rows of {metric} in {args.lake}")
        kind = "bucket" if name == "histogram_quantile" else "value"
        series = series_of(rows, cols, prom_name, kind)
        if "time" in case:
            steps = [round(case["time"] * 1000)]
        else:
            start, end, step = (round(case[k] * 1000) for k in ("start", "end", "step"))
            steps = list(range(start, end + 1, step))
        acc = collections.defaultdict(list)
        for t in steps:
            for k, v in evaluate(name, series, t).items():
                acc[k].append([t / 1000, v])
        results[name] = [{"metric": dict(k), "values": vs} for k, vs in acc.items()]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
